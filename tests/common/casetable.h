/* casetable.h -- one Check test per row of a table of cases, each under
 * its own name.
 *
 * tcase_add_loop_test runs a test once per index but reports every run
 * under the function's name ("fresh_resource_raced:3"); a failing case is
 * then known only by its number.  CT_ADD_CASES registers each row as a
 * test of its own, named "<function>/<row's name>" in Check's output and
 * TAP log, and runs the function with _i set to the row's index:
 *
 *     static const struct { const char *name; ... } cases[] = {...};
 *     START_TEST(scenario) { ... cases[_i] ... } END_TEST
 *     CT_ADD_CASES(tc, scenario, cases);
 *
 * The table's rows must start with (or have) a const char *name.  It uses
 * Check's own registration call (the one its tcase_add_loop_test macro
 * expands to) with a TTest per row; the names live in static storage, as
 * Check keeps pointers to them until the runner is freed. */
#ifndef FENCE_CASETABLE_H
#define FENCE_CASETABLE_H
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define CT_MAX_CASES 256 /* every table of one binary together */

#define CT_ADD_CASES(tc, test, table)                                                        \
    ct_add_cases((tc), (test), (int)(sizeof(table) / sizeof((table)[0])), &(table)[0].name, \
                 sizeof((table)[0]))

/* Row i's name is at (char *)first_name + i * stride. */
static inline void ct_add_cases(TCase *tc, const TTest *test, int n,
                                const char *const *first_name, size_t stride)
{
    static TTest tests[CT_MAX_CASES];
    static char names[CT_MAX_CASES][128];
    static int used;
    for (int i = 0; i < n; i++) {
        const char *row = *(const char *const *)((const char *)first_name + (size_t)i * stride);
        if (used == CT_MAX_CASES || row == NULL) {
            fprintf(stderr, "casetable: %s: %s\n", test->name,
                    row == NULL ? "a row without a name" : "more than CT_MAX_CASES cases");
            exit(EXIT_FAILURE);
        }
        snprintf(names[used], sizeof names[used], "%s/%s", test->name, row);
        tests[used] = *test;
        tests[used].name = names[used];
        _tcase_add_test(tc, &tests[used], 0, 0, i, i + 1);
        used++;
    }
}

#endif
