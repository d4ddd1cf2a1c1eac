/* ex_env.h -- where the examples find their servers: a command-line flag,
 * else the environment.  Shared by the examples so each stays about what
 * it shows. */
#ifndef FENCE_EX_ENV_H
#define FENCE_EX_ENV_H

/* The variable's value, or NULL when it is unset or empty. */
const char *ex_env(const char *name);

/* The Redis URL: `given` (--redis), else $FENCE_REDIS_URL, else
 * $FENCE_TEST_REDIS_URL (set by scripts/with-servers).  NULL, after saying
 * how to set it on stderr, when there is none. */
const char *ex_redis_url(const char *prog, const char *given);

/* The PostgreSQL conninfo: `given` (--pg), else $FENCE_TEST_PG_CONNINFO,
 * else "" when PGHOST or PGPORT is set (libpq reads them).  NULL, after
 * saying how to set it on stderr, when there is none. */
const char *ex_pg_conninfo(const char *prog, const char *given);

#endif
