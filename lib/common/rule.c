/* rule.c -- the store rule, written once for every store written in C (the
 * gate's two backings, the PostgreSQL extension's guards, the SQLite
 * library's C side).  The SQL stores write the same rule once each, as one
 * SQL function per store; tests/common/rule_cases.tsv is the one table of
 * cases every implementation is run against. */
#include "common.h"

#include <string.h>

/* "" and NULL are both "no holder"; holders compare as whole strings. */
static int holder_same(const char *a, const char *b)
{
    if (a == NULL) {
        a = "";
    }
    if (b == NULL) {
        b = "";
    }
    return strcmp(a, b) == 0;
}

int fence__mark_rule(uint64_t mark, const char *mark_holder, uint64_t token, const char *holder)
{
    if (token > mark) {
        return FENCE__RULE_RAISE;
    }
    if (token < mark) {
        return FENCE__RULE_OLDER;
    }
    return holder_same(mark_holder, holder) ? FENCE__RULE_ADMIT : FENCE__RULE_REPEAT;
}

int fence__stamp_rule(uint64_t stamp, uint64_t token)
{
    return token >= stamp ? FENCE__RULE_ADMIT : FENCE__RULE_OLDER;
}

const char *fence__rule_name(int outcome)
{
    switch (outcome) {
    case FENCE__RULE_ADMIT:
        return "admit";
    case FENCE__RULE_RAISE:
        return "raise";
    case FENCE__RULE_OLDER:
        return "older";
    case FENCE__RULE_REPEAT:
        return "repeat";
    default:
        return "?";
    }
}

const char *fence__rule_reason(int outcome)
{
    return outcome == FENCE__RULE_OLDER || outcome == FENCE__RULE_REPEAT ? fence__rule_name(outcome)
                                                                         : NULL;
}
