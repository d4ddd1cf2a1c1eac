/* etcdutil.h -- what the etcd suites share: clients on the test etcd
 * (FENCE_TEST_ETCD_URL of scripts/with-servers --etcd) or on a cluster of
 * their own (scripts/etcd-cluster via FENCE_TEST_ETCD_CLUSTER, in a folder
 * under FENCE_TEST_SPAWN_DIR), and etcd reached behind fence's back (curl
 * to the v3 JSON gateway) to break things.  Each helper fails the running
 * test with a message when something it needs goes wrong. */
#ifndef FENCE_ETCDUTIL_H
#define FENCE_ETCDUTIL_H
#include "fence.h"
#include "leaseutil.h" /* EXPECT_RC */
#include "testutil.h"

#include <jansson.h>
#include <stdint.h>

/* A client on url (NULL: the test etcd) with default options. */
fence_client *eu_open(const char *url);
/* The test etcd's first member, "127.0.0.1:PORT". */
const char *eu_member(void);

/* POST body (JSON) to path on member hostport ("127.0.0.1:P"; NULL: the
 * test etcd) with curl; the reply parsed (json_decref it).  extra: more
 * curl arguments (TLS files), or NULL. */
json_t *eu_post(const char *hostport, const char *path, const char *body);

/* The owner key of name under the default prefix, base64 (static). */
const char *eu_owner_b64(const char *name);
/* The owner key's kv (NULL when absent) on hostport (NULL: the test etcd). */
json_t *eu_owner_kv(const char *hostport, const char *name);
/* The etcd lease id holding name's owner key (0: not held). */
int64_t eu_owner_lease(const char *hostport, const char *name);

/* A cluster of n members of the test's own, in a new folder under
 * FENCE_TEST_SPAWN_DIR, extra flags for etcd-cluster start (NULL: none):
 * its folder (static per call: copy it) and in eps "h:p,h:p,...". */
typedef struct eu_cluster {
    char dir[512];
    char eps[256];
    int n;
} eu_cluster;
void eu_cluster_start(eu_cluster *c, int n, const char *extra);
void eu_cluster_stop(eu_cluster *c);
/* Run "etcd-cluster VERB DIR ARGS" on c (args NULL: none); its exit status. */
int eu_cluster_cmd(const eu_cluster *c, const char *verb, const char *args);
/* The leading member (1..n), waiting up to 5 s for one. */
int eu_leader(const eu_cluster *c);
/* Member k's "127.0.0.1:P". */
const char *eu_cluster_member(const eu_cluster *c, int k);

/* The on_lost callback that counts into *(atomic_int *)user. */
void eu_count_lost(fence_lease *l, int reason, void *user);

#endif
