/* metrics.c -- counters, the heartbeat latency histogram, and the
 * Prometheus text exposition format. */
#include "lease_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const double bounds[FENCE_LATENCY_NBUCKETS - 1] = FENCE_LATENCY_BUCKETS;

void fence__metrics_latency(fence__metrics *m, int64_t us)
{
    double s = (double)us / 1e6;
    int b = 0;
    while (b < FENCE_LATENCY_NBUCKETS - 1 && s > bounds[b]) {
        b++;
    }
    atomic_fetch_add(&m->hb_bucket[b], 1);
    atomic_fetch_add(&m->hb_count, 1);
    atomic_fetch_add(&m->hb_sum_ns, (uint64_t)us * 1000);
}

void fence__metrics_behind(fence__metrics *m, int64_t behind_us)
{
    atomic_fetch_add(&m->clock_behind, 1);
    int_fast64_t seen = atomic_load(&m->clock_behind_max_us);
    while (behind_us > seen &&
           !atomic_compare_exchange_weak(&m->clock_behind_max_us, &seen, behind_us)) {
    }
}

fence_status fence_client_metrics(const fence_client *c, fence_metrics *out)
{
    if (c == NULL || out == NULL) {
        return fence__fail(c, FENCE_EINVAL, "fence_client_metrics: %s is NULL",
                           c == NULL ? "client" : "out");
    }
    const fence__metrics *m = &c->m;
    memset(out, 0, sizeof *out);
    out->lease_acquired = atomic_load(&m->lease_acquired);
    out->lease_lost = atomic_load(&m->lease_lost);
    out->lease_released = atomic_load(&m->lease_released);
    out->acquire_attempts = atomic_load(&m->acquire_attempts);
    out->acquire_contended = atomic_load(&m->acquire_contended);
    out->acquire_timeouts = atomic_load(&m->acquire_timeouts);
    out->renew_ok = atomic_load(&m->renew_ok);
    out->renew_failed = atomic_load(&m->renew_failed);
    int64_t held = atomic_load(&m->leases_held);
    out->leases_held = held > 0 ? (uint64_t)held : 0;
    out->token_regressions = atomic_load(&m->token_regressions);
    for (int i = 0; i < FENCE_LATENCY_NBUCKETS; i++) {
        out->heartbeat_latency_bucket[i] = atomic_load(&m->hb_bucket[i]);
    }
    out->heartbeat_latency_count = atomic_load(&m->hb_count);
    out->heartbeat_latency_sum_s = (double)atomic_load(&m->hb_sum_ns) / 1e9;
    out->clock_behind = atomic_load(&m->clock_behind);
    out->clock_behind_max_us = atomic_load(&m->clock_behind_max_us);
    out->redis_persistence = -1;
    if (c->iss != NULL) {
        c->ops->metrics(c->iss, out); /* reconnects, redis_persistence */
    }
    return FENCE_OK;
}

typedef struct {
    char *buf;
    size_t size;
    size_t len;
} sink;

__attribute__((format(printf, 2, 3))) static void put(sink *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = s->len < s->size ? s->size - s->len : 0;
    int n = vsnprintf(room ? s->buf + s->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) {
        s->len += (size_t)n;
    }
}

static void counter(sink *s, const char *name, const char *help, uint64_t v)
{
    put(s, "# HELP fence_%s %s\n# TYPE fence_%s counter\nfence_%s %" PRIu64 "\n", name, help,
        name, name, v);
}

int fence_metrics_prometheus(const fence_metrics *m, char *buf, size_t size)
{
    if (m == NULL || (buf == NULL && size != 0)) {
        return -1;
    }
    sink s = {buf, size, 0};
    if (size > 0) {
        buf[0] = '\0';
    }
    counter(&s, "lease_acquired_total", "Leases acquired.", m->lease_acquired);
    counter(&s, "lease_lost_total", "Leases lost: renewal refused or validity ran out.",
            m->lease_lost);
    counter(&s, "lease_released_total", "Leases released by their holder.", m->lease_released);
    counter(&s, "acquire_attempts_total", "Acquire attempts (script calls).",
            m->acquire_attempts);
    counter(&s, "acquire_contended_total", "Acquire attempts that found the lease held.",
            m->acquire_contended);
    counter(&s, "acquire_timeouts_total", "Waiting acquires whose deadline passed.",
            m->acquire_timeouts);
    counter(&s, "renew_ok_total", "Lease renewals that succeeded.", m->renew_ok);
    counter(&s, "renew_failed_total", "Lease renewals refused or not answered.",
            m->renew_failed);
    counter(&s, "reconnects_total", "Connections to Redis re-established.", m->reconnects);
    counter(&s, "token_regressions_total", "Leases given a fresh token after a store had "
            "seen a higher one (fence_lease_reissue).", m->token_regressions);
    counter(&s, "clock_behind_total", "Tokens issued (or refused) by a Redis server whose "
            "clock was behind the one that issued the counter's previous token.",
            m->clock_behind);
    put(&s, "# HELP fence_clock_behind_max_seconds The largest such lag seen.\n"
            "# TYPE fence_clock_behind_max_seconds gauge\nfence_clock_behind_max_seconds %.6f\n",
            (double)m->clock_behind_max_us / 1e6);
    put(&s, "# HELP fence_leases_held Leases currently held.\n# TYPE fence_leases_held gauge\n"
            "fence_leases_held %" PRIu64 "\n", m->leases_held);
    put(&s, "# HELP fence_redis_persistence Redis persistence when last checked: 1 on (AOF "
            "or RDB), 0 off, -1 unknown.\n# TYPE fence_redis_persistence gauge\n"
            "fence_redis_persistence %" PRId64 "\n", m->redis_persistence);
    put(&s, "# HELP fence_heartbeat_latency_seconds Round-trip time of heartbeat passes.\n"
            "# TYPE fence_heartbeat_latency_seconds histogram\n");
    uint64_t cum = 0;
    for (int i = 0; i < FENCE_LATENCY_NBUCKETS; i++) {
        cum += m->heartbeat_latency_bucket[i];
        if (i < FENCE_LATENCY_NBUCKETS - 1) {
            put(&s, "fence_heartbeat_latency_seconds_bucket{le=\"%g\"} %" PRIu64 "\n", bounds[i],
                cum);
        } else {
            put(&s, "fence_heartbeat_latency_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n", cum);
        }
    }
    put(&s, "fence_heartbeat_latency_seconds_sum %.6f\n", m->heartbeat_latency_sum_s);
    put(&s, "fence_heartbeat_latency_seconds_count %" PRIu64 "\n", m->heartbeat_latency_count);
    return s.len > (size_t)INT32_MAX ? -1 : (int)s.len;
}
