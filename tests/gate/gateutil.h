/* gateutil.h -- what the gate suites (test_gate_*) share: a temp folder
 * per test, opening gates, and begin + commit in one go with every check
 * of the returned txn and stale description. */
#ifndef FENCE_GATEUTIL_H
#define FENCE_GATEUTIL_H

#include "fence_gate.h"
#include "testutil.h"

#include <stdint.h>

/* The temp folder of the running test and the gate file in it. */
extern char gu_tmp_dir[256];
extern char gu_db_path[300];

/* Check fixture: a fresh temp folder per test (Check forks one process
 * per test), removed afterwards. */
void gu_setup(void);
void gu_teardown(void);

/* n, or less under valgrind (everything is ~20x slower there). */
int gu_scale(int n);

/* Open a gate (persistent: gu_db_path) and assert that it worked. */
fence_gate *gu_open_opts(int persistent, int64_t wait_ms, int sync);
fence_gate *gu_open(int persistent, int64_t wait_ms);
void gu_close(fence_gate *g);

#define ck_status(rc, want, g)                                                         \
    do {                                                                               \
        int rc_ = (rc);                                                                \
        ck_assert_msg(rc_ == (want), "%s: got %s, want %s (%s)", #rc,                 \
                      fence_status_name(rc_), fence_status_name(want),                \
                      fence_gate_errmsg(g));                                           \
    } while (0)

/* begin + commit in one go; returns begin's status.  mark (optional) gets
 * the mark begin saw: fence_gate_txn_mark() on FENCE_OK, the stale
 * description's highest on FENCE_STALE, 0 otherwise.  Also checks the txn
 * (token, resource, mark <= token) and the stale description (all zero
 * unless FENCE_STALE; offered/highest/kind/object when it is). */
int gu_write_once(fence_gate *g, const char *res, uint64_t token, uint64_t *mark);

/* The same with a holder (NULL: none), for gates where holders were
 * recorded: a FENCE_STALE may also be a repeat (equal token, another
 * holder; checked: reason, holders differ).  stale_out (optional) gets the
 * description.  gu_write_once() is gu_write_as() with no holder, and
 * asserts that nothing recorded a holder either. */
int gu_write_as(fence_gate *g, const char *res, uint64_t token, const char *holder,
                uint64_t *mark, fence_stale *stale_out);

/* Holder ids for the tests. */
#define GU_HA "0123456789abcdef0123456789abcdef"
#define GU_HB "fedcba9876543210fedcba9876543210"

/* The resource's committed mark (asserting fence_gate_mark worked). */
uint64_t gu_mark(fence_gate *g, const char *res);

/* Nonzero when every byte of the stale description is zero. */
int gu_stale_is_zero(const fence_stale *st);

#endif
