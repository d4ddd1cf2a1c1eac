/* asyncutil.h -- helpers for the asynchronous API's suites: a poll(2)
 * loop that drives a fence_async until a condition holds or a deadline
 * passes (no test can hang), and recorders for its callbacks. */
#ifndef FENCE_ASYNCUTIL_H
#define FENCE_ASYNCUTIL_H
#include "fence_async.h"
#include "setutil.h"

/* What an acquire callback said (calls counts them). */
typedef struct au_acq {
    int calls;
    fence_status st;
    fence_lease *lease;
    int64_t pttl_ms;
    char msg[600];
} au_acq;
void au_on_acquired(fence_async *a, fence_status st, fence_lease *lease, int64_t pttl_ms,
                    const char *msg, void *user);

/* What a release callback said. */
typedef struct au_rel {
    int calls;
    fence_status st;
    char msg[600];
} au_rel;
void au_on_released(fence_async *a, fence_status st, const char *msg, void *user);

/* Drive a with poll(2) until *flag != 0 or max_ms passed; returns the ms
 * it ran.  flag NULL: run max_ms. */
int64_t au_run(fence_async *a, const int *flag, int64_t max_ms);

/* A handle on url with default options (dense tokens when dense); fails
 * the test unless it opens. */
fence_async *au_open(const char *url, int dense);

/* Acquire name (ttl_ms; lost recorder lr may be NULL) and drive the loop
 * until the callback came (at most 5 s); fails unless it did. */
au_acq au_acquire(fence_async *a, const char *name, int64_t ttl_ms, lu_lost *lr);

/* Release l and drive until the callback came (at most 5 s). */
au_rel au_release(fence_async *a, fence_lease *l);

/* A redis-server of the test's own on a unix socket in a temporary
 * folder: its path into sock, its pid returned; au_unix_stop() ends it. */
int au_unix_start(char *sock, size_t n);
void au_unix_stop(int pid, const char *sock);

/* A delaying TCP relay (tests/net/delay_relay, built by make tests-build)
 * on a free loopback port in front of 127.0.0.1:target_port, each chunk
 * delayed delay_ms each way: a server that answers every round trip
 * 2 * delay_ms late.  Its port into *port, its pid returned (au_relay_stop
 * ends it and removes its delay file). */
typedef struct au_relay {
    int pid, port;
    char dir[64];
} au_relay;
void au_relay_start(au_relay *r, int target_port, int delay_ms);
void au_relay_stop(au_relay *r);
#endif
