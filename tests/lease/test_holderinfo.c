/*
 * test_holderinfo.c -- fence_lease_options.holder_info and
 * fence_lease_inspect_info(): the description is stored by the acquire
 * itself under "fence:{NAME}:info" ("<holder id>:<text>", the owner key's
 * TTL), kept alive by renewals and fence_lease_reissue(), deleted by
 * release, expires with a killed holder; bad values are refused.  Also
 * fence_client_open_url(&c, NULL) and FENCE_REDIS_URL.  Real redis-server
 * from scripts/with-servers.
 */
#include "fence.h"
#include "leaseutil.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* "fence:{NAME}:info"; a key that does not fit fails the test */
static void info_key(char *buf, size_t n, const char *name)
{
    int len = snprintf(buf, n, "fence:{%s}:info", name);
    ck_assert(len >= 0 && (size_t)len < n);
}

static fence_lease *acquire_info(fence_client *c, const char *name, int64_t ttl,
                                 int64_t every, const char *info)
{
    fence_lease_options lo;
    fence_lease_options_init(&lo, ttl);
    lo.renew_every_ms = every;
    lo.holder_info = info;
    fence_lease *l = NULL;
    EXPECT_RC(fence_acquire(c, name, &lo, &l), FENCE_OK, c);
    ck_assert_ptr_nonnull(l);
    return l;
}

static fence_lease_info inspect_ok(fence_client *c, const char *name)
{
    fence_lease_info in;
    memset(&in, 0x5a, sizeof in); /* must be overwritten */
    EXPECT_RC(fence_lease_inspect_info(c, name, &in), FENCE_OK, c);
    return in;
}

/* The value stored in Redis and what inspect shows, for a held lease. */
static void expect_info(fence_client *c, redisContext *r, fence_lease *l, const char *text)
{
    const char *name = fence_lease_name(l);
    char key[FENCE_NAME_MAX + 32], want[FENCE_HOLDER_LEN + FENCE_HOLDER_INFO_MAX + 2];
    info_key(key, sizeof key, name);
    snprintf(want, sizeof want, "%s:%s", fence_lease_holder(l), text);
    lu_expect_get(r, key, want);
    fence_lease_info in = inspect_ok(c, name);
    ck_assert_int_eq(in.held, 1);
    ck_assert_int_gt(in.pttl_ms, 0);
    ck_assert_uint_eq(in.holder_token, fence_lease_token(l));
    ck_assert_uint_ge(in.last_token, fence_lease_token(l));
    ck_assert_str_eq(in.holder, fence_lease_holder(l));
    ck_assert_str_eq(in.holder_info, text);
}

/* ------------------------------------------------------------------ */

/* Stored by the acquire round trip itself, with the owner key's TTL;
 * inspect shows it; release deletes it. */
START_TEST(stored_at_acquire_gone_at_release)
{
    fence_client *c = lu_open_client();
    redisContext *r = tu_redis();
    char name[128];
    snprintf(name, sizeof name, "%s", tu_name("hinfo"));
    const char *text = "host=web1 pid=42 since=2024-05-01T10:00:00Z";
    fence_metrics m0 = lu_metrics(c);
    fence_lease *l = acquire_info(c, name, 30000, 0, text);
    ck_assert_uint_eq(lu_metrics(c).acquire_attempts - m0.acquire_attempts, 1);
    expect_info(c, r, l, text);
    char key[FENCE_NAME_MAX + 32], okey[FENCE_NAME_MAX + 32];
    info_key(key, sizeof key, name);
    lu_owner_key(okey, sizeof okey, name);
    long long pi = lu_rpttl(r, key), po = lu_rpttl(r, okey);
    ck_assert_int_gt(pi, 25000);
    ck_assert_int_le(pi, 30000);
    ck_assert_msg(llabs(pi - po) <= 50, "info TTL %lld vs owner TTL %lld", pi, po);

    /* fence_lease_inspect() (the old call) still answers as before. */
    int held = 0;
    int64_t pttl = 0;
    uint64_t ht = 0, lt = 0;
    EXPECT_RC(fence_lease_inspect(c, name, &held, &pttl, &ht, &lt), FENCE_OK, c);
    ck_assert_int_eq(held, 1);
    ck_assert_uint_eq(ht, fence_lease_token(l));

    EXPECT_RC(fence_release(l), FENCE_OK, c);
    ck_assert_int_eq(lu_rexists(r, key), 0);
    ck_assert_int_eq(lu_rexists(r, okey), 0);
    fence_lease_info in = inspect_ok(c, name);
    ck_assert_int_eq(in.held, 0);
    ck_assert_int_eq(in.pttl_ms, -1);
    ck_assert_uint_eq(in.holder_token, 0);
    ck_assert_uint_gt(in.last_token, 0);
    ck_assert_str_eq(in.holder, "");
    ck_assert_str_eq(in.holder_info, "");
    redisFree(r);
    fence_client_close(c);
}
END_TEST

/* No holder_info (NULL or ""): no key; inspect says "" but names the holder. */
START_TEST(no_info_no_key)
{
    fence_client *c = lu_open_client();
    redisContext *r = tu_redis();
    char name[128];
    snprintf(name, sizeof name, "%s", tu_name("hnone"));
    char key[FENCE_NAME_MAX + 32];
    info_key(key, sizeof key, name);
    for (int i = 0; i < 2; i++) {
        fence_lease *l = acquire_info(c, name, 5000, 0, i == 0 ? NULL : "");
        ck_assert_int_eq(lu_rexists(r, key), 0);
        fence_lease_info in = inspect_ok(c, name);
        ck_assert_int_eq(in.held, 1);
        ck_assert_str_eq(in.holder, fence_lease_holder(l));
        ck_assert_str_eq(in.holder_info, "");
        EXPECT_RC(fence_release(l), FENCE_OK, c);
    }
    redisFree(r);
    fence_client_close(c);
}
END_TEST

/* Renewals (the heartbeat's batched pass and fence_renew()) keep it alive
 * across many TTLs, with the owner key's TTL. */
START_TEST(kept_by_renewals)
{
    fence_client *c = lu_open_client();
    fence_client *m = lu_open_client_mode(FENCE_HEARTBEAT_MANUAL);
    redisContext *r = tu_redis();
    char n1[128], n2[128];
    snprintf(n1, sizeof n1, "%s", tu_name("hrenew"));
    snprintf(n2, sizeof n2, "%s", tu_name("hrenewm"));
    fence_lease *l = acquire_info(c, n1, 300, 0, "heartbeat thread");
    fence_lease_options lo;
    fence_lease_options_init(&lo, 300);
    lo.no_heartbeat = 1;
    lo.holder_info = "renewed by hand";
    fence_lease *lm = NULL;
    EXPECT_RC(fence_acquire(m, n2, &lo, &lm), FENCE_OK, m);
    for (int i = 0; i < 20; i++) { /* 20 x 100 ms: ~7 TTLs */
        tu_sleep_ms(100);
        EXPECT_RC(fence_renew(lm), FENCE_OK, m);
    }
    ck_assert_int_eq(fence_lease_lost(l), 0);
    expect_info(c, r, l, "heartbeat thread");
    expect_info(m, r, lm, "renewed by hand");
    char k1[FENCE_NAME_MAX + 32], o1[FENCE_NAME_MAX + 32];
    info_key(k1, sizeof k1, n1);
    lu_owner_key(o1, sizeof o1, n1);
    long long pi = lu_rpttl(r, k1), po = lu_rpttl(r, o1);
    ck_assert_int_gt(pi, 0);
    ck_assert_msg(llabs(pi - po) <= 50, "info TTL %lld vs owner TTL %lld", pi, po);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    EXPECT_RC(fence_release(lm), FENCE_OK, m);
    ck_assert_int_eq(lu_rexists(r, k1), 0);
    redisFree(r);
    fence_client_close(m);
    fence_client_close(c);
}
END_TEST

/* fence_heartbeat_run() renews a batch of leases with and without info. */
START_TEST(kept_by_batched_pass)
{
    fence_client *c = lu_open_client_mode(FENCE_HEARTBEAT_MANUAL);
    redisContext *r = tu_redis();
    enum { N = 12 };
    fence_lease *ls[N];
    char names[N][128];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "%s", tu_name("hbatch"));
        char text[32];
        snprintf(text, sizeof text, "lease %d", i);
        ls[i] = acquire_info(c, names[i], 300, 0, i % 2 ? text : NULL);
    }
    for (int p = 0; p < 10; p++) { /* ~3 TTLs */
        tu_sleep_ms(100);
        EXPECT_RC(fence_heartbeat_run(c, NULL), FENCE_OK, c);
    }
    for (int i = 0; i < N; i++) {
        char key[FENCE_NAME_MAX + 32], text[32];
        info_key(key, sizeof key, names[i]);
        snprintf(text, sizeof text, "lease %d", i);
        ck_assert_int_eq(fence_lease_lost(ls[i]), 0);
        if (i % 2) {
            expect_info(c, r, ls[i], text);
        } else {
            ck_assert_int_eq(lu_rexists(r, key), 0);
        }
        EXPECT_RC(fence_release(ls[i]), FENCE_OK, c);
        ck_assert_int_eq(lu_rexists(r, key), 0);
    }
    redisFree(r);
    fence_client_close(c);
}
END_TEST

/* fence_lease_reissue() changes the token, not the holder: the info stays. */
START_TEST(kept_by_reissue)
{
    fence_client *c = lu_open_client();
    redisContext *r = tu_redis();
    char name[128];
    snprintf(name, sizeof name, "%s", tu_name("hreiss"));
    fence_lease *l = acquire_info(c, name, 5000, 0, "reissued");
    uint64_t t0 = fence_lease_token(l), t1 = 0;
    EXPECT_RC(fence_lease_reissue(l, t0 + 1000, &t1), FENCE_OK, c);
    ck_assert_uint_gt(t1, t0 + 1000);
    expect_info(c, r, l, "reissued");
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    char key[FENCE_NAME_MAX + 32];
    info_key(key, sizeof key, name);
    ck_assert_int_eq(lu_rexists(r, key), 0);
    redisFree(r);
    fence_client_close(c);
}
END_TEST

/* A lease lost to expiry takes its info along; the next holder (with or
 * without info) never shows the old one. */
START_TEST(expires_and_not_shown_for_another_holder)
{
    fence_client *c = lu_open_client();
    redisContext *r = tu_redis();
    char name[128];
    snprintf(name, sizeof name, "%s", tu_name("hexp"));
    char key[FENCE_NAME_MAX + 32], okey[FENCE_NAME_MAX + 32];
    info_key(key, sizeof key, name);
    lu_owner_key(okey, sizeof okey, name);
    fence_lease_options lo;
    fence_lease_options_init(&lo, 100);
    lo.no_heartbeat = 1;
    lo.holder_info = "short lived";
    fence_lease *l = NULL;
    EXPECT_RC(fence_acquire(c, name, &lo, &l), FENCE_OK, c);
    tu_sleep_ms(250);
    ck_assert_int_eq(lu_rexists(r, key), 0);
    ck_assert_int_eq(lu_rexists(r, okey), 0);
    EXPECT_RC(fence_release(l), FENCE_LOST, c);

    /* A stale description (here: the owner key deleted behind fence's
     * back) is not shown for another holder, and its release deletes it. */
    fence_lease *a = acquire_info(c, name, 5000, 0, "first");
    ck_assert_int_eq(lu_rdel(r, okey), 1);
    fence_lease *b = acquire_info(c, name, 5000, 0, NULL);
    fence_lease_info in = inspect_ok(c, name);
    ck_assert_str_eq(in.holder, fence_lease_holder(b));
    ck_assert_str_eq(in.holder_info, "");
    EXPECT_RC(fence_release(a), FENCE_LOST, c);
    ck_assert_int_eq(lu_rexists(r, key), 1); /* a's release left b alone */
    EXPECT_RC(fence_release(b), FENCE_OK, c);
    ck_assert_int_eq(lu_rexists(r, key), 0);
    redisFree(r);
    fence_client_close(c);
}
END_TEST

/* A holder killed with SIGKILL: its description expires with its lease. */
static const char *holder_path(void)
{
    static char path[PATH_MAX + 16];
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ck_assert_int_gt(n, 0);
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(path, sizeof path, "%s/holder", exe);
    ck_assert_msg(access(path, X_OK) == 0, "the helper program %s is missing", path);
    return path;
}

START_TEST(expires_with_killed_holder)
{
    fence_client *c = lu_open_client();
    redisContext *r = tu_redis();
    char name[128];
    snprintf(name, sizeof name, "%s", tu_name("hkill"));
    const char *text = "host=test pid=child";
    ck_assert_int_eq(setenv("FENCE_TEST_HOLDER_INFO", text, 1), 0);
    const char *path = holder_path();
    char *argv[] = {(char *)(uintptr_t)path, (char *)(uintptr_t)tu_env("FENCE_TEST_REDIS_URL"),
                    name, "600", NULL};
    int p[2];
    ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
    pid_t pid = 0;
    int err = posix_spawn(&pid, path, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    unsetenv("FENCE_TEST_HOLDER_INFO");
    ck_assert_msg(err == 0, "posix_spawn %s: %s", path, strerror(err));
    char line[256] = "";
    size_t len = 0;
    struct pollfd pfd = {p[0], POLLIN, 0};
    while (len + 1 < sizeof line && poll(&pfd, 1, 10000) > 0) {
        char ch;
        if (read(p[0], &ch, 1) != 1 || ch == '\n') {
            break;
        }
        line[len++] = ch;
        line[len] = '\0';
    }
    ck_assert_msg(strncmp(line, "token ", 6) == 0, "holder said \"%s\"", line);
    tu_sleep_ms(1500); /* several renewals by the holder's heartbeat */
    fence_lease_info in = inspect_ok(c, name);
    ck_assert_int_eq(in.held, 1);
    ck_assert_int_eq(strlen(in.holder), FENCE_HOLDER_LEN);
    ck_assert_str_eq(in.holder_info, text);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    close(p[0]);
    char key[FENCE_NAME_MAX + 32];
    info_key(key, sizeof key, name);
    long long pi = lu_rpttl(r, key);
    ck_assert_int_gt(pi, 0);
    ck_assert_int_le(pi, 600);
    tu_sleep_ms(700);
    ck_assert_int_eq(lu_rexists(r, key), 0);
    in = inspect_ok(c, name);
    ck_assert_int_eq(in.held, 0);
    ck_assert_str_eq(in.holder_info, "");
    redisFree(r);
    fence_client_close(c);
}
END_TEST

/* Too long, control characters, non-ASCII: FENCE_EINVAL, nothing written. */
START_TEST(bad_values)
{
    fence_client *c = lu_open_client();
    redisContext *r = tu_redis();
    char name[128];
    snprintf(name, sizeof name, "%s", tu_name("hbad"));
    char okey[FENCE_NAME_MAX + 32], key[FENCE_NAME_MAX + 32];
    lu_owner_key(okey, sizeof okey, name);
    info_key(key, sizeof key, name);
    char longest[FENCE_HOLDER_INFO_MAX + 2];
    memset(longest, 'x', sizeof longest);
    longest[FENCE_HOLDER_INFO_MAX + 1] = '\0'; /* 257 bytes */
    const char *bad[] = {longest, "a\nb", "tab\there", "esc\x1b", "del\x7f", "caf\xc3\xa9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fence_lease_options lo;
        fence_lease_options_init(&lo, 5000);
        lo.holder_info = bad[i];
        fence_lease *l = (fence_lease *)&lo; /* must become NULL */
        EXPECT_RC(fence_acquire(c, name, &lo, &l), FENCE_EINVAL, c);
        ck_assert_ptr_null(l);
        ck_assert_ptr_nonnull(strstr(fence_client_errmsg(c), "holder_info"));
        ck_assert_int_eq(lu_rexists(r, okey), 0);
        ck_assert_int_eq(lu_rexists(r, key), 0);
    }
    ck_assert_ptr_nonnull(strstr(fence_client_errmsg(c), "printable ASCII"));
    /* Exactly FENCE_HOLDER_INFO_MAX bytes, every printable byte: fine. */
    longest[FENCE_HOLDER_INFO_MAX] = '\0';
    for (int i = 0; i < FENCE_HOLDER_INFO_MAX; i++) {
        longest[i] = (char)(0x20 + i % 95);
    }
    fence_lease *l = acquire_info(c, name, 5000, 0, longest);
    expect_info(c, r, l, longest);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    fence_lease_info in;
    EXPECT_RC(fence_lease_inspect_info(c, name, NULL), FENCE_EINVAL, c);
    EXPECT_RC(fence_lease_inspect_info(NULL, name, &in), FENCE_EINVAL, (fence_client *)NULL);
    EXPECT_RC(fence_lease_inspect_info(c, "", &in), FENCE_EINVAL, c);
    redisFree(r);
    fence_client_close(c);
}
END_TEST

/* fence_client_open_url(&c, NULL): FENCE_REDIS_URL, else the default. */
START_TEST(open_url_null)
{
    const char *url = tu_env("FENCE_TEST_REDIS_URL");
    fence_client *c = NULL;
    ck_assert_int_eq(setenv("FENCE_REDIS_URL", url, 1), 0);
    EXPECT_RC(fence_client_open_url(&c, NULL), FENCE_OK, c);
    ck_assert_msg(strstr(fence_client_url(c), lu_hostport("FENCE_TEST_REDIS_URL")) != NULL,
                  "client URL %s, FENCE_REDIS_URL %s", fence_client_url(c), url);
    fence_lease *l = lu_acquire_ok(c, tu_name("henv"), 2000, 0);
    EXPECT_RC(fence_release(l), FENCE_OK, c);
    fence_client_close(c);

    /* Unset or empty: redis://127.0.0.1:6379 (nothing listens there in the
     * test environment, or something does: either way that is its URL). */
    for (int i = 0; i < 2; i++) {
        if (i == 0) {
            ck_assert_int_eq(unsetenv("FENCE_REDIS_URL"), 0);
        } else {
            ck_assert_int_eq(setenv("FENCE_REDIS_URL", "", 1), 0);
        }
        c = NULL;
        int rc = fence_client_open_url(&c, NULL);
        ck_assert_ptr_nonnull(c);
        ck_assert_msg(rc == FENCE_OK || rc == FENCE_ECONN || rc == FENCE_EAUTH,
                      "open_url(NULL): %s (%s)", fence_status_name(rc),
                      fence_client_errmsg(c));
        ck_assert_msg(strncmp(fence_client_url(c), "redis://127.0.0.1:6379", 22) == 0,
                      "client URL %s", fence_client_url(c));
        fence_client_close(c);
    }

    /* A bad URL in the environment is reported like a bad argument. */
    ck_assert_int_eq(setenv("FENCE_REDIS_URL", "http://nope", 1), 0);
    c = NULL;
    EXPECT_RC(fence_client_open_url(&c, NULL), FENCE_EINVAL, c);
    fence_client_close(c);
    unsetenv("FENCE_REDIS_URL");
}
END_TEST

static Suite *holderinfo_suite(void)
{
    Suite *s = suite_create("holderinfo");
    TCase *tc = tcase_create("holderinfo");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, stored_at_acquire_gone_at_release);
    tcase_add_test(tc, no_info_no_key);
    tcase_add_test(tc, kept_by_renewals);
    tcase_add_test(tc, kept_by_batched_pass);
    tcase_add_test(tc, kept_by_reissue);
    tcase_add_test(tc, expires_and_not_shown_for_another_holder);
    tcase_add_test(tc, expires_with_killed_holder);
    tcase_add_test(tc, bad_values);
    tcase_add_test(tc, open_url_null);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(holderinfo_suite());
}
