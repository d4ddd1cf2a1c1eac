/* args.c -- parsing the command line: durations, numbers, options, names. */
#include "cli.h"
#include "common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The unit after a duration's number; 0 when p is not one. */
static uint64_t unit_ms(const char *p)
{
    static const struct {
        const char *suffix;
        uint64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}, {"", 1000}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(p, units[i].suffix) == 0) {
            return units[i].ms;
        }
    }
    return 0;
}

/* The fraction after the '.' at *p (perhaps no digits): its digits as a
 * number, and 10^digits in *scale (at most 9 digits).  Advances *p.  0, or
 * -1 with why. */
static int scan_fraction(const char **p, uint64_t *frac, uint64_t *scale, const char **why)
{
    *frac = 0;
    *scale = 1;
    for (; **p >= '0' && **p <= '9'; (*p)++) {
        if (*scale >= 1000000000) {
            *why = "too many decimals";
            return -1;
        }
        *frac = *frac * 10 + (uint64_t)(**p - '0');
        *scale *= 10;
    }
    return 0;
}

int cli__parse_duration(const char *s, int64_t max_ms, int64_t *out_ms, const char **why)
{
    if (s == NULL || *s == '\0') {
        *why = "empty duration";
        return -1;
    }
    if (*s == '-' || *s == '+') {
        *why = "a duration has no sign";
        return -1;
    }
    /* The whole part: the one decimal grammar (common.h). */
    const char *p = s;
    uint64_t whole = 0, frac = 0, scale = 1;
    if (*s < '0' || *s > '9') {
        *why = "a duration starts with a number, e.g. 250ms, 10s, 2m, 1h";
        return -1;
    }
    if (fence__u64_scan(s, UINT64_MAX, &whole, &p) != 0) {
        *why = s[0] == '0' ? "a number has no leading zero" : "duration too large";
        return -1;
    }
    if (*p == '.') {
        p++;
        if (scan_fraction(&p, &frac, &scale, why) != 0) {
            return -1;
        }
    }
    uint64_t unit = unit_ms(p);
    if (unit == 0) {
        *why = "unknown unit (use ms, s, m, h or d; a bare number is seconds)";
        return -1;
    }
    if (whole > (uint64_t)max_ms / unit) {
        *why = "duration too large";
        return -1;
    }
    uint64_t f = frac * unit; /* < 1e9 * 86400000 < 2^64 */
    if (f % scale != 0) {
        *why = "finer than a millisecond";
        return -1;
    }
    uint64_t ms = whole * unit + f / scale;
    if (ms > (uint64_t)max_ms) {
        *why = "duration too large";
        return -1;
    }
    *out_ms = (int64_t)ms;
    return 0;
}

int cli__parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    return s == NULL ? -1 : fence__u64_parse(s, strlen(s), max, out);
}

int cli__usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fence%s%s: ", cmd != NULL ? " " : "", cmd != NULL ? cmd : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(try 'fence %s%s--help')\n", cmd != NULL ? cmd : "", cmd != NULL ? " " : "");
    return CLI_EX_USAGE;
}

const char *cli__optval(cli__argv *a, const char *arg, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(arg, name, n) == 0 && arg[n] == '=') {
        return arg + n + 1;
    }
    if (a->i + 1 >= a->argc) {
        cli__usage_error(a->cmd, "option '%s' needs a value", name);
        return NULL;
    }
    a->i++;
    return a->argv[a->i];
}

int cli__check_name(const char *cmd, const char *name)
{
    const char *why = name != NULL ? fence__name_problem(name, FENCE__NAME_PRINTABLE, NULL)
                                   : "is empty";
    if (why != NULL) {
        return cli__usage_error(cmd, "the lease NAME %s", why);
    }
    return CLI_EX_OK;
}

int cli__is_opt(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return strncmp(arg, name, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

void cli__put_printable(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        fputc(*p >= 0x20 && *p < 0x7f ? *p : '?', f);
    }
}
