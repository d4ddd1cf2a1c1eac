/* setup "gate": `g`, an in-memory gate (fragments that open their own
 * gate ignore it), and write_the_thing()/write_the_file(), the caller's
 * own write (here: a counter).  Check: the write happened exactly once. */
#include "common.h"
#include <fence_gate.h>

static fence_gate *g;
static int doc_writes;

static int write_the_thing(void)
{
    doc_writes++;
    return 0;
}
#define write_the_file write_the_thing

static int doc_setup_gate(void)
{
    fence_status st = fence_gate_open(&g, NULL);
    if (st != FENCE_OK)
        return doc_fail("gate: %s", fence_gate_errmsg(g));
    return 0;
}

static int doc_check_gate(void)
{
    if (doc_writes != 1)
        return doc_fail("gate: the snippet's write ran %d times, expected once", doc_writes);
    return 0;
}

static void doc_teardown_gate(void)
{
    fence_gate_close(g);
}
