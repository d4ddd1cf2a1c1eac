/* issuerutil.h -- the behaviour suites (test_heartbeat, test_lease) against either
 * issuer: FENCE_TEST_ISSUER=redis (the default) or pg (the PostgreSQL
 * issuer on the test PostgreSQL, fence.sql installed by lu_iss_setup()).
 * What a suite does to the server behind the library's back, said once for
 * both: a lease's state as the server has it, taking it away, stopping,
 * starting and freezing the server.  Each helper fails the running test
 * when the server does not answer. */
#ifndef FENCE_ISSUERUTIL_H
#define FENCE_ISSUERUTIL_H
#include "leaseutil.h"

/* 1 when the suite runs against the PostgreSQL issuer. */
int lu_iss_pg(void);
/* "redis" or "pg", for messages. */
const char *lu_iss_name(void);
/* The issuer's URL (the test Redis, or postgresql://... of the test
 * PostgreSQL). */
const char *lu_iss_url(void);
/* Unchecked fixture: with pg, install fence.sql on the test PostgreSQL. */
void lu_iss_setup(void);
/* A client on the issuer, default options / this heartbeat mode. */
fence_client *lu_iss_open(void);
fence_client *lu_iss_open_mode(int mode);
/* Whether NAME is held now (the owner key exists; the row holds it and has
 * not expired). */
int lu_iss_held(const char *name);
/* The holder's "<holder id>:<token>" (fence_lease_owner()'s form; malloc'd),
 * or NULL when free. */
char *lu_iss_owner(const char *name);
/* NAME's remaining TTL in ms; -2 when not held. */
long long lu_iss_pttl(const char *name);
/* Take NAME from its holder: gone (the key deleted; the row expired).
 * Returns 1 if it was held. */
int lu_iss_drop(const char *name);
/* Give NAME to another owner: OWNER is "<32 hex>:<token>", for 5 s. */
void lu_iss_take(const char *name, const char *owner);
/* The server: "stop" and "start" (PostgreSQL: pg_ctl stop -m fast, and
 * start with the options it had), SIGSTOP / SIGCONT (PostgreSQL: the
 * postmaster and every child). */
void lu_iss_ctl(const char *cmd);
void lu_iss_signal(int sig);
/* Unchecked teardown: start the server again when it is down. */
void lu_iss_ensure_up(void);
/* Cut every connection the library has to the server (Redis: CLIENT KILL
 * TYPE normal; PostgreSQL: pg_terminate_backend of application_name
 * 'fence'). */
void lu_iss_kill_connections(void);
/* Wait until someone waits for NAME's release, at most timeout_ms; whether
 * anyone did (Redis: a subscriber on its channel or a pattern; PostgreSQL:
 * a session of the library's LISTENing on fence_lease_released, the one
 * channel for every name). */
int lu_iss_waiting(const char *name, int timeout_ms);


/* For the PostgreSQL suites (test_pg_issuer*): run SQL (printf-style) on C,
 * failing the test on an error; the first value of the first row, malloc'd
 * ("" when none), or as a number. */
struct pg_conn;
char *lu_pg_value(struct pg_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
long long lu_pg_num(struct pg_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Send SIG to the postmaster whose data folder is DATA and to every child
 * of it. */
void lu_pg_signal_cluster(const char *data, int sig);

#endif
