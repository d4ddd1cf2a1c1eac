/* ex_env.c -- see ex_env.h. */
#include "ex_env.h"

#include <stdio.h>
#include <stdlib.h>

const char *ex_env(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && *v != '\0' ? v : NULL;
}

const char *ex_redis_url(const char *prog, const char *given)
{
    const char *url = given != NULL ? given : ex_env("FENCE_REDIS_URL");
    if (url == NULL) {
        url = ex_env("FENCE_TEST_REDIS_URL");
    }
    if (url == NULL) {
        fprintf(stderr, "%s: no Redis: pass --redis URL or set FENCE_REDIS_URL\n", prog);
    }
    return url;
}

const char *ex_pg_conninfo(const char *prog, const char *given)
{
    const char *ci = given != NULL ? given : ex_env("FENCE_TEST_PG_CONNINFO");
    if (ci == NULL && (ex_env("PGHOST") != NULL || ex_env("PGPORT") != NULL)) {
        ci = "";
    }
    if (ci == NULL) {
        fprintf(stderr, "%s: no PostgreSQL: pass --pg CONNINFO or set "
                        "FENCE_TEST_PG_CONNINFO or PGHOST/PGPORT\n", prog);
    }
    return ci;
}
