/* token.c -- the one grammar for tokens and other decimals, so that every
 * library (and the SQL, which uses the same rule) refuses the same text. */
#include "common.h"

int fence__u64_scan(const char *s, uint64_t max, uint64_t *out, const char **end)
{
    if (s == NULL || *s < '0' || *s > '9') {
        return -1;
    }
    if (s[0] == '0' && s[1] >= '0' && s[1] <= '9') {
        return -1; /* leading zero */
    }
    uint64_t v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (d > max || v > (max - d) / 10) {
            return -1;
        }
        v = v * 10 + d;
    }
    *out = v;
    if (end != NULL) {
        *end = p;
    }
    return 0;
}

int fence__u64_parse(const char *s, size_t len, uint64_t max, uint64_t *out)
{
    /* Scan a bounded copy: s need not be NUL-terminated (Redis replies). */
    char buf[24];
    if (s == NULL || len == 0 || len >= sizeof buf) {
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        buf[i] = s[i];
    }
    buf[len] = '\0';
    const char *end = NULL;
    uint64_t v = 0;
    if (fence__u64_scan(buf, max, &v, &end) != 0 || end != buf + len) {
        return -1;
    }
    *out = v;
    return 0;
}

int fence__token_parse(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    if (fence__u64_parse(s, len, FENCE_TOKEN_MAX, &v) != 0 || v == 0) {
        return -1;
    }
    *out = v;
    return 0;
}

size_t fence__u64_text(uint64_t v, char *out)
{
    if (v < 100) { /* most of RESP's lengths */
        size_t n = v >= 10;
        out[0] = (char)('0' + (n ? v / 10 : v));
        out[n] = (char)('0' + v % 10);
        out[n + 1] = '\0';
        return n + 1;
    }
    char digits[20];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++) {
        out[i] = digits[n - 1 - i];
    }
    out[n] = '\0';
    return n;
}
