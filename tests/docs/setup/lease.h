/* setup "lease": a client `c` on $FENCE_TEST_REDIS_URL and a held lease
 * `lease` (name "docs-snippet"); token and holder are the lease's. */
#include "common.h"
#include <fence.h>

static fence_client *c;
static fence_lease *lease;

static int doc_setup_lease(void)
{
    const char *url = doc_env("FENCE_TEST_REDIS_URL");
    if (url == NULL)
        return doc_fail("FENCE_TEST_REDIS_URL is not set (run under scripts/with-servers)");
    fence_status st = fence_client_open_url(&c, url);
    if (st != FENCE_OK)
        return doc_fail("redis: %s", fence_client_errmsg(c));
    st = fence_try_acquire(c, "docs-snippet", 10000, &lease);
    if (st != FENCE_OK)
        return doc_fail("acquire: %s: %s", fence_status_name(st), fence_client_errmsg(c));
    token = fence_lease_token(lease);
    holder = fence_lease_holder(lease);
    return 0;
}

static int doc_check_lease(void)
{
    return 0;
}

static void doc_teardown_lease(void)
{
    /* holder points into the lease: forget it before the lease goes */
    holder = "0123456789abcdef0123456789abcdef";
    if (lease != NULL)
        fence_release(lease);
    lease = NULL;
    fence_client_close(c);
}
