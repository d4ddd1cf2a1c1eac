/* rulecases.h -- tests/common/rule_cases.tsv, the one table of cases of the
 * store rule, read for a C test (which registers one Check test per row
 * with RULECASES_ADD, casetable.h's registration for a table read at run
 * time).
 *
 * Ownership: rulecases_load() returns a static table, read once per
 * process; nothing is freed. */
#ifndef FENCE_RULECASES_H
#define FENCE_RULECASES_H
#include <stdint.h>

#include "casetable.h"

#define RULECASE_HOLDER_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define RULECASE_HOLDER_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define RULECASES_MAX 128

enum rulecase_kind { RULECASE_MARK, RULECASE_ROW };
enum rulecase_outcome { RULECASE_RAISE, RULECASE_ADMIT, RULECASE_OLDER, RULECASE_REPEAT };

typedef struct rulecase {
    const char *name;        /* first, for CT_ADD_CASES */
    enum rulecase_kind kind;
    uint64_t mark;           /* the mark or the row's stamp; 0: none yet */
    const char *mark_holder; /* RULECASE_HOLDER_A / _B, or NULL for none */
    uint64_t token;
    const char *holder;      /* likewise */
    enum rulecase_outcome outcome;
} rulecase;

/* The table (path: $FENCE_RULE_CASES, else tests/common/rule_cases.tsv
 * from the current folder, which is the repository's when make test
 * runs).  Exits the process with a message on a missing or malformed file:
 * a suite never runs on half a table.  *n gets the row count. */
const rulecase *rulecases_load(int *n);
/* Only the rows of one kind, in file order, into out[RULECASES_MAX]. */
int rulecases_of_kind(enum rulecase_kind kind, rulecase *out);
/* One Check test per row of ROWS[0..N) (the table, or one kind of it),
 * named "<test>/<row's name>" (casetable.h); the test reads ROWS[_i]. */
#define RULECASES_ADD(tc, test, rows, n) \
    ct_add_cases((tc), (test), (n), &(rows)[0].name, sizeof(rows)[0])

/* "raise", "admit", "older", "repeat". */
const char *rulecase_outcome_name(enum rulecase_outcome o);
/* The reason= a refusal carries ("older", "repeat"), NULL for admissions. */
const char *rulecase_reason(enum rulecase_outcome o);

#endif
