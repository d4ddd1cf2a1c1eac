/*
 * self_heal.c -- self-healing after a token regression (issue 8).
 *
 * A store can be ahead of the Redis counter: the counter was lost and a
 * Redis server whose clock runs behind took over, or the store's numbers
 * came from elsewhere.  Then a holder that really holds its lease has its
 * write rejected as stale.  fence_lease_reissue() -- one round trip, only
 * while the lease is still held -- raises the counter past the store's
 * highest token and gives the lease a fresh, higher token; the write then
 * lands.  The token_regressions metric counts these.
 *
 *   self_heal [--redis URL]     (else $FENCE_REDIS_URL / $FENCE_TEST_REDIS_URL)
 *
 * The store is an in-memory SQLite database guarded by fence_sqlite.
 */
#include "ex_env.h"
#include "fence.h"
#include "fence_sqlite.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

/* Advance the resource "report" with token and holder, and write. */
static fence_status write_report(sqlite3 *db, uint64_t token, const char *holder,
                                 fence_stale *stale)
{
    fence_status st = fence_sqlite_set_token(db, token, holder);
    if (st == FENCE_OK) {
        st = fence_sqlite_advance(db, "report", stale);
    }
    if (st == FENCE_OK && sqlite3_exec(db, "INSERT INTO report(body) VALUES ('done')", NULL,
                                       NULL, NULL) != SQLITE_OK) {
        st = FENCE_EDB;
    }
    return st;
}

int main(int argc, char **argv)
{
    const char *given = argc == 3 && strcmp(argv[1], "--redis") == 0 ? argv[2] : NULL;
    const char *url = ex_redis_url("self_heal", given);
    if (url == NULL) {
        return 64;
    }
    sqlite3 *db = NULL;
    fence_client *c = NULL;
    int rc = 1;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK || fence_sqlite_attach(db) != FENCE_OK ||
        sqlite3_exec(db, "CREATE TABLE report(body TEXT)", NULL, NULL, NULL) != SQLITE_OK) {
        fprintf(stderr, "self_heal: sqlite: %s\n", fence_sqlite_errmsg(db));
        goto out;
    }
    if (fence_client_open_url(&c, url) != FENCE_OK) {
        fprintf(stderr, "self_heal: %s\n", fence_client_errmsg(c));
        goto out;
    }
    fence_lease *l = NULL;
    if (fence_try_acquire(c, "self-heal-demo", 10000, &l) != FENCE_OK) {
        fprintf(stderr, "self_heal: acquire: %s\n", fence_client_errmsg(c));
        goto out;
    }
    /* The store is ahead: an earlier writer recorded a higher token. */
    uint64_t token = fence_lease_token(l), ahead = token + UINT64_C(60000000); /* +1 min */
    write_report(db, ahead, NULL, NULL);
    printf("holder %s has token %" PRIu64 "; the store has seen %" PRIu64 "\n",
           fence_lease_holder(l), token, ahead);

    fence_stale stale;
    fence_status st = write_report(db, token, fence_lease_holder(l), &stale);
    printf("write with token %" PRIu64 ": %s (highest %" PRIu64 ")\n", token,
           fence_status_name(st), stale.highest);
    if (st == FENCE_STALE && !fence_lease_lost(l)) {
        uint64_t fresh = 0;
        st = fence_lease_reissue(l, stale.highest, &fresh);
        printf("reissue past %" PRIu64 ": %s, new token %" PRIu64 "\n", stale.highest,
               fence_status_name(st), fresh);
        if (st == FENCE_OK) {
            st = write_report(db, fresh, fence_lease_holder(l), &stale);
            printf("write with token %" PRIu64 ": %s\n", fresh, fence_status_name(st));
        }
    }
    fence_metrics m;
    fence_client_metrics(c, &m);
    printf("token_regressions: %" PRIu64 "\n", m.token_regressions);
    rc = st == FENCE_OK && m.token_regressions == 1 ? 0 : 1;
    fence_release(l);
out:
    fence_client_close(c);
    sqlite3_close(db);
    return rc;
}
