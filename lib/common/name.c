/* name.c -- the one check for lease and resource names, and for holder ids. */
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

const char *fence__holder_problem(const char *h, size_t len, size_t *bad_byte)
{
    if (h == NULL || len == 0) {
        return "is empty";
    }
    for (size_t i = 0; i < len; i++) {
        char c = h[i];
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) {
            continue;
        }
        if (bad_byte != NULL) {
            *bad_byte = i;
        }
        return c >= 'A' && c <= 'F' ? "contains an uppercase hex digit (holder ids are lowercase)"
                                    : "contains a character that is not a hex digit";
    }
    if (len != FENCE_HOLDER_LEN) {
        return len < FENCE_HOLDER_LEN ? "is shorter than 32 characters"
                                      : "is longer than 32 characters";
    }
    return NULL;
}
