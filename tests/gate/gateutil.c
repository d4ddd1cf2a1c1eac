/* gateutil.c -- helpers of the gate suites (see gateutil.h). */
#include "gateutil.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char gu_tmp_dir[256];
char gu_db_path[300];

void gu_setup(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(gu_tmp_dir, sizeof gu_tmp_dir, "%s/fence-gate-XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    ck_assert_msg(mkdtemp(gu_tmp_dir) != NULL, "mkdtemp: %s", strerror(errno));
    snprintf(gu_db_path, sizeof gu_db_path, "%s/gate.db", gu_tmp_dir);
}

void gu_teardown(void)
{
    DIR *d = opendir(gu_tmp_dir);
    if (d == NULL) {
        return;
    }
    struct dirent *de;
    char p[600];
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
            snprintf(p, sizeof p, "%s/%s", gu_tmp_dir, de->d_name);
            unlink(p);
        }
    }
    closedir(d);
    rmdir(gu_tmp_dir);
}

int gu_scale(int n)
{
    const char *v = getenv("FENCE_VALGRIND");
    return v != NULL && strcmp(v, "1") == 0 ? n / 2 : n;
}

fence_gate *gu_open_opts(int persistent, int64_t wait_ms, int sync)
{
    fence_gate_options o;
    fence_gate_options_init(&o);
    o.path = persistent ? gu_db_path : NULL;
    o.wait_ms = wait_ms;
    o.synchronous = sync;
    fence_gate *g = NULL;
    int rc = fence_gate_open(&g, &o);
    ck_assert_msg(rc == FENCE_OK, "fence_gate_open: %s: %s", fence_status_name(rc),
                  fence_gate_errmsg(g));
    ck_assert_int_eq(fence_gate_is_persistent(g), persistent);
    return g;
}

fence_gate *gu_open(int persistent, int64_t wait_ms)
{
    return gu_open_opts(persistent, wait_ms, FENCE_GATE_SYNC_FULL);
}

void gu_close(fence_gate *g)
{
    ck_status(fence_gate_close(g), FENCE_OK, g);
}

int gu_stale_is_zero(const fence_stale *st)
{
    const unsigned char *p = (const unsigned char *)st;
    for (size_t i = 0; i < sizeof *st; i++) {
        if (p[i] != 0) {
            return 0;
        }
    }
    return 1;
}

int gu_write_as(fence_gate *g, const char *res, uint64_t token, const char *holder,
                uint64_t *mark, fence_stale *stale_out)
{
    fence_gate_txn *t = NULL;
    fence_stale st;
    memset(&st, 0xa5, sizeof st); /* begin must zero it */
    int rc = fence_gate_begin(g, res, token, holder, &t, &st);
    uint64_t seen = 0;
    if (rc == FENCE_OK) {
        ck_assert_ptr_nonnull(t);
        ck_assert_uint_eq(fence_gate_txn_token(t), token);
        ck_assert_str_eq(fence_gate_txn_resource(t), res);
        ck_assert_str_eq(fence_gate_txn_holder(t), holder != NULL ? holder : "");
        seen = fence_gate_txn_mark(t);
        ck_assert_uint_le(seen, token);
        ck_assert(gu_stale_is_zero(&st));
        ck_status(fence_gate_commit(t), FENCE_OK, g);
    } else {
        ck_assert_ptr_null(t);
    }
    if (rc == FENCE_STALE) {
        ck_assert_uint_eq(st.offered, token);
        ck_assert_uint_ge(st.highest, token);
        /* Equal tokens are refused only as a repeat, lower ones as older. */
        ck_assert_int_eq(st.reason, st.highest == token ? FENCE_STALE_REPEAT : FENCE_STALE_OLDER);
        ck_assert_int_eq(st.kind, FENCE_OBJECT_RESOURCE);
        ck_assert_str_eq(st.object, res);
        size_t hn = strlen(st.holder);
        ck_assert(hn == 0 || hn == FENCE_HOLDER_LEN);
        if (st.reason == FENCE_STALE_REPEAT) { /* the holders differ */
            ck_assert_str_ne(st.holder, holder != NULL ? holder : "");
        }
        seen = st.highest;
    } else if (rc != FENCE_OK) {
        ck_assert(gu_stale_is_zero(&st));
    }
    if (mark != NULL) {
        *mark = seen;
    }
    if (stale_out != NULL) {
        *stale_out = st;
    }
    return rc;
}

int gu_write_once(fence_gate *g, const char *res, uint64_t token, uint64_t *mark)
{
    fence_stale st;
    int rc = gu_write_as(g, res, token, NULL, mark, &st);
    if (rc == FENCE_STALE) { /* no holders anywhere: only older tokens */
        ck_assert_uint_gt(st.highest, token);
        ck_assert_int_eq(st.reason, FENCE_STALE_OLDER);
        ck_assert_str_eq(st.holder, "");
    }
    return rc;
}

uint64_t gu_mark(fence_gate *g, const char *res)
{
    uint64_t m = 99999;
    ck_status(fence_gate_mark(g, res, &m), FENCE_OK, g);
    return m;
}
