/* client.c -- opening a client, and turning fence status codes into exit
 * statuses and messages.  Messages name the server by fence_client_url(),
 * which never holds credentials. */
#include "cli.h"

#include <stdio.h>

int cli__exit_for(int status)
{
    switch (status) {
    case FENCE_OK:
        return CLI_EX_OK;
    case FENCE_EINVAL:
        return CLI_EX_USAGE;
    case FENCE_ECONN:
    case FENCE_EAUTH:
    case FENCE_EPROTO:
    case FENCE_EREPLICAS:
        return CLI_EX_UNAVAILABLE;
    case FENCE_ECONFIG:
        return CLI_EX_CONFIG;
    case FENCE_BUSY:
    case FENCE_TIMEOUT:
        return CLI_EX_TEMPFAIL;
    case FENCE_LOST:
        return CLI_EX_LOST;
    case FENCE_ESYS:
        return CLI_EX_OSERR;
    default:
        return CLI_EX_SOFTWARE;
    }
}

int cli__fail(const char *cmd, fence_client *c, const char *what, int rc)
{
    const char *detail = c != NULL ? fence_client_errmsg(c) : "";
    fprintf(stderr, "fence %s: %s: %s%s%s\n", cmd, what, fence_strerror(rc),
            detail[0] != '\0' ? ": " : "", detail);
    return cli__exit_for(rc);
}

int cli__open(const char *cmd, const fence_client_options *o, fence_client **out)
{
    fence_client *c = NULL;
    int rc = fence_client_open(&c, o);
    if (rc != FENCE_OK) {
        /* The URL itself is not printed: it may hold a password. */
        int ex = cli__fail(cmd, c, "cannot open the Redis client", rc);
        fence_client_close(c);
        *out = NULL;
        return ex;
    }
    *out = c;
    return CLI_EX_OK;
}

int cli__open_url(const char *cmd, const char *url, fence_client **out)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    return cli__open(cmd, &o, out);
}
