/* reissue.c -- fence_lease_reissue(): self-healing after a regression.  A
 * store has seen a higher token than the lease's although the lease is
 * still held (the counter fell behind: a failover, a restart); the issuer
 * raises the counter past the store's highest token and gives the lease a
 * fresh token, only while it is still held (state.c's claim and outcome). */
#include "lease_internal.h"

#include <inttypes.h>

fence_status fence_lease_reissue(fence_lease *l, uint64_t store_highest, uint64_t *new_token)
{
    if (l == NULL) {
        return fence__fail(NULL, FENCE_EINVAL, "fence_lease_reissue: lease is NULL");
    }
    fence_client *c = l->c;
    if (store_highest >= FENCE_TOKEN_MAX) {
        return fence__fail(c, FENCE_EINVAL, "fence_lease_reissue: store_highest %" PRIu64
                           " leaves no higher token (at most 2^63-2)", store_highest);
    }
    fence_status st = fence__reissue_claim(l);
    if (st != FENCE_OK) {
        return st;
    }
    fence__grant g = {0, 0, 0, -1};
    st = c->ops->reissue(c->iss, &l->il, store_highest, INT64_MAX, &g);
    st = fence__reissued(l, st, &g); /* lost: l may be gone */
    if (st != FENCE_OK) {
        return st;
    }
    if (new_token != NULL) {
        *new_token = g.token;
    }
    fence__clear(c);
    return FENCE_OK;
}
