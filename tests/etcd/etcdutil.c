/* etcdutil.c -- see etcdutil.h. */
#include "etcdutil.h"

#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

fence_client *eu_open(const char *url)
{
    fence_client *c = NULL;
    if (url == NULL) {
        url = tu_env("FENCE_TEST_ETCD_URL");
    }
    fence_status st = fence_client_open_url(&c, url);
    ck_assert_msg(st == FENCE_OK, "open %s: %s (%s)", url, fence_status_name(st),
                  c != NULL ? fence_client_errmsg(c) : "-");
    return c;
}

const char *eu_member(void)
{
    static char buf[128];
    const char *u = tu_env("FENCE_TEST_ETCD_URL");
    ck_assert_msg(strncmp(u, "etcd://", 7) == 0, "FENCE_TEST_ETCD_URL: %s", u);
    snprintf(buf, sizeof buf, "%s", u + 7);
    buf[strcspn(buf, ",")] = '\0';
    return buf;
}

json_t *eu_post(const char *hostport, const char *path, const char *body)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "curl -s -m 5 -X POST 'http://%s%s' -d '%s'",
             hostport != NULL ? hostport : eu_member(), path, body);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char out[65536];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int rc = pclose(p);
    ck_assert_msg(rc == 0, "%s: exit %d", cmd, rc);
    json_error_t je;
    json_t *v = json_loads(out, 0, &je);
    ck_assert_msg(v != NULL, "%s: not JSON: %s", cmd, out);
    return v;
}

const char *eu_owner_b64(const char *name)
{
    static char b64[2048];
    char key[1024];
    int n = snprintf(key, sizeof key, "fence/o/%s", name);
    EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)key, n);
    return b64;
}

json_t *eu_owner_kv(const char *hostport, const char *name)
{
    char body[2200];
    snprintf(body, sizeof body, "{\"key\":\"%s\"}", eu_owner_b64(name));
    json_t *r = eu_post(hostport, "/v3/kv/range", body);
    json_t *kv = json_array_get(json_object_get(r, "kvs"), 0);
    if (kv != NULL) {
        json_incref(kv);
    }
    json_decref(r);
    return kv;
}

int64_t eu_owner_lease(const char *hostport, const char *name)
{
    json_t *kv = eu_owner_kv(hostport, name);
    const char *s = json_string_value(json_object_get(kv, "lease"));
    int64_t id = s != NULL ? strtoll(s, NULL, 10) : 0;
    json_decref(kv);
    return id;
}

void eu_cluster_start(eu_cluster *c, int n, const char *extra)
{
    static int seq;
    const char *spawn = tu_env("FENCE_TEST_SPAWN_DIR");
    const char *tool = tu_env("FENCE_TEST_ETCD_CLUSTER");
    snprintf(c->dir, sizeof c->dir, "%s/etcd-%d-%d", spawn, (int)getpid(), ++seq);
    c->n = n;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s start %s %d %s", tool, c->dir, n, extra != NULL ? extra : "");
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char out[256] = "";
    if (fgets(out, sizeof out, p) == NULL) {
        out[0] = '\0';
    }
    int rc = pclose(p);
    ck_assert_msg(rc == 0 && out[0] != '\0', "%s: exit %d", cmd, rc);
    out[strcspn(out, "\n")] = '\0';
    snprintf(c->eps, sizeof c->eps, "%s", out);
}

int eu_cluster_cmd(const eu_cluster *c, const char *verb, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s %s %s", tu_env("FENCE_TEST_ETCD_CLUSTER"), verb, c->dir,
             args != NULL ? args : "");
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

void eu_cluster_stop(eu_cluster *c)
{
    eu_cluster_cmd(c, "stop", NULL);
}

int eu_leader(const eu_cluster *c)
{
    for (int i = 0; i < 100; i++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s leader %s", tu_env("FENCE_TEST_ETCD_CLUSTER"), c->dir);
        FILE *p = popen(cmd, "r");
        char out[16] = "";
        if (p != NULL && fgets(out, sizeof out, p) == NULL) {
            out[0] = '\0';
        }
        if (p != NULL) {
            pclose(p);
        }
        int k = atoi(out);
        if (k >= 1 && k <= c->n) {
            return k;
        }
        tu_sleep_ms(50);
    }
    ck_abort_msg("no leader in %s", c->dir);
    return 0;
}

const char *eu_cluster_member(const eu_cluster *c, int k)
{
    static char buf[4][64];
    static int i;
    char *b = buf[i++ % 4];
    const char *p = c->eps;
    for (int j = 1; j < k && p != NULL; j++) {
        p = strchr(p, ',');
        p = p != NULL ? p + 1 : NULL;
    }
    ck_assert_ptr_nonnull(p);
    snprintf(b, 64, "%.*s", (int)strcspn(p, ","), p);
    return b;
}

void eu_count_lost(fence_lease *l, int reason, void *user)
{
    fprintf(stderr, "lost: %s (%s): %s\n", fence_lease_name(l), fence_status_name(reason),
            fence_client_errmsg(fence_lease_client(l)));
    atomic_fetch_add((atomic_int *)user, 1);
}
