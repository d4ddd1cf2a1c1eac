#include "asyncutil.h"
int main(void) { return 0; }
