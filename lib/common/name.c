/* name.c -- the one check for lease and resource names. */
#include "common.h"

#include <string.h>

const char *fence__name_problem(const char *name, int rules, size_t *bad_byte)
{
    if (name == NULL) {
        return "is NULL";
    }
    if (name[0] == '\0') {
        return "is empty";
    }
    size_t n = strnlen(name, FENCE_NAME_MAX + 1);
    if (n > FENCE_NAME_MAX) {
        return "is longer than 512 bytes";
    }
    if (rules == FENCE__NAME_PRINTABLE) {
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)name[i];
            if (ch < 0x20 || ch == 0x7f) {
                if (bad_byte != NULL) {
                    *bad_byte = i;
                }
                return "contains a control character";
            }
        }
    }
    return NULL;
}
