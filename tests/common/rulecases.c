/* rulecases.c -- reads tests/common/rule_cases.tsv (see rulecases.h). */
#include "rulecases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static rulecase table[RULECASES_MAX];
static char names[RULECASES_MAX][64];
static int rows = -1;

static void die(const char *path, int line, const char *what)
{
    fprintf(stderr, "rulecases: %s:%d: %s\n", path, line, what);
    exit(EXIT_FAILURE);
}

static const char *holder_of(const char *f, const char *path, int line)
{
    if (strcmp(f, "-") == 0) {
        return NULL;
    }
    if (strcmp(f, "A") == 0) {
        return RULECASE_HOLDER_A;
    }
    if (strcmp(f, "B") == 0) {
        return RULECASE_HOLDER_B;
    }
    die(path, line, "a holder must be A, B or -");
    return NULL;
}

static uint64_t number_of(const char *f, const char *path, int line)
{
    char *end = NULL;
    unsigned long long v = strtoull(f, &end, 10);
    if (*f == '\0' || *end != '\0' || v > 9223372036854775807ULL) {
        die(path, line, "a token must be a decimal 0..2^63-1");
    }
    return (uint64_t)v;
}

const rulecase *rulecases_load(int *n)
{
    if (rows >= 0) {
        *n = rows;
        return table;
    }
    const char *path = getenv("FENCE_RULE_CASES");
    if (path == NULL || *path == '\0') {
        path = "tests/common/rule_cases.tsv";
    }
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        die(path, 0, "cannot open the table of cases (run from the repository, or set FENCE_RULE_CASES)");
    }
    char buf[512];
    int line = 0;
    rows = 0;
    while (fgets(buf, sizeof buf, f) != NULL) {
        line++;
        buf[strcspn(buf, "\r\n")] = '\0';
        if (buf[0] == '#' || buf[0] == '\0') {
            continue;
        }
        char *fld[7];
        int k = 0;
        char *save = NULL;
        for (char *t = strtok_r(buf, "\t", &save); t != NULL && k < 7; t = strtok_r(NULL, "\t", &save)) {
            fld[k++] = t;
        }
        if (k != 7) {
            die(path, line, "a row has 7 tab-separated fields");
        }
        if (rows == RULECASES_MAX) {
            die(path, line, "more than RULECASES_MAX rows");
        }
        rulecase *r = &table[rows];
        if (strcmp(fld[0], "mark") == 0) {
            r->kind = RULECASE_MARK;
        } else if (strcmp(fld[0], "row") == 0) {
            r->kind = RULECASE_ROW;
        } else {
            die(path, line, "kind must be mark or row");
        }
        snprintf(names[rows], sizeof names[rows], "%s", fld[1]);
        r->name = names[rows];
        r->mark = number_of(fld[2], path, line);
        r->mark_holder = holder_of(fld[3], path, line);
        r->token = number_of(fld[4], path, line);
        r->holder = holder_of(fld[5], path, line);
        if (r->token == 0) {
            die(path, line, "an offered token is 1..2^63-1");
        }
        if (strcmp(fld[6], "raise") == 0) {
            r->outcome = RULECASE_RAISE;
        } else if (strcmp(fld[6], "admit") == 0) {
            r->outcome = RULECASE_ADMIT;
        } else if (strcmp(fld[6], "older") == 0) {
            r->outcome = RULECASE_OLDER;
        } else if (strcmp(fld[6], "repeat") == 0) {
            r->outcome = RULECASE_REPEAT;
        } else {
            die(path, line, "outcome must be raise, admit, older or repeat");
        }
        if (r->kind == RULECASE_ROW && (r->mark_holder != NULL || r->holder != NULL ||
                                        r->outcome == RULECASE_RAISE || r->outcome == RULECASE_REPEAT)) {
            die(path, line, "a row case has no holders and is admit or older");
        }
        rows++;
    }
    fclose(f);
    if (rows == 0) {
        die(path, line, "no cases");
    }
    *n = rows;
    return table;
}

int rulecases_of_kind(enum rulecase_kind kind, rulecase *out)
{
    int n = 0, all = 0;
    const rulecase *t = rulecases_load(&all);
    for (int i = 0; i < all; i++) {
        if (t[i].kind == kind) {
            out[n++] = t[i];
        }
    }
    return n;
}

const char *rulecase_outcome_name(enum rulecase_outcome o)
{
    switch (o) {
    case RULECASE_RAISE:
        return "raise";
    case RULECASE_ADMIT:
        return "admit";
    case RULECASE_OLDER:
        return "older";
    case RULECASE_REPEAT:
        return "repeat";
    }
    return "?";
}

const char *rulecase_reason(enum rulecase_outcome o)
{
    return o == RULECASE_OLDER ? "older" : o == RULECASE_REPEAT ? "repeat" : NULL;
}
