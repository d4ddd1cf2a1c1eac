/* client.c -- opening a client, and turning fence status codes into exit
 * statuses and messages.  Messages name the server by fence_client_url(),
 * which never holds credentials. */
#include "cli.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    case FENCE_ECLOCK:
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

/* The last failure cli__fail() reported (for fence status --json). */
static int last_status = -1;
static char last_msg[1024];

int cli__fail(const char *cmd, fence_client *c, const char *what, int rc)
{
    const char *detail = c != NULL ? fence_client_errmsg(c) : "";
    snprintf(last_msg, sizeof last_msg, "%s: %s%s%s", what, fence_strerror(rc),
             detail[0] != '\0' ? ": " : "", detail);
    last_status = rc;
    fprintf(stderr, "fence %s: %s\n", cmd, last_msg);
    return cli__exit_for(rc);
}

int cli__last_failure(const char **msg)
{
    *msg = last_msg;
    return last_status;
}

int cli__open(const char *cmd, const fence_client_options *o, fence_client **out)
{
    fence_client *c = NULL;
    int rc = fence_client_open(&c, o);
    if (rc != FENCE_OK) {
        /* The URL itself is not printed: it may hold a password. */
        int ex = cli__fail(cmd, c, "cannot open the client", rc);
        fence_client_close(c);
        *out = NULL;
        return ex;
    }
    *out = c;
    return CLI_EX_OK;
}

/* The value of a file/name option: NULL after a usage message when it has
 * none or it is empty. */
static const char *conn_val(cli__argv *a, const char *arg, const char *name, int *ex)
{
    const char *v = cli__optval(a, arg, name);
    if (v == NULL) {
        *ex = CLI_EX_USAGE;
    } else if (v[0] == '\0') {
        *ex = cli__usage_error(a->cmd, "%s: empty value", name);
        v = NULL;
    }
    return v;
}

int cli__conn_opt(cli__argv *a, const char *arg, cli__conn *cc, int *ex)
{
    static const struct {
        const char *name;
        size_t off;
    } files[] = {
        {"--password-file", offsetof(cli__conn, password_file)},
        {"--sentinel-password-file", offsetof(cli__conn, sentinel_password_file)},
        {"--cacert", offsetof(cli__conn, cacert)},
        {"--cacertdir", offsetof(cli__conn, cacertdir)},
        {"--cert", offsetof(cli__conn, cert)},
        {"--key", offsetof(cli__conn, key)},
        {"--sni", offsetof(cli__conn, sni)},
    };
    *ex = CLI_EX_OK;
    if (strcmp(arg, "--tls") == 0) {
        cc->tls = 1;
        return 1;
    }
    if (strcmp(arg, "--insecure") == 0) {
        cc->insecure = 1;
        return 1;
    }
    if (cli__is_opt(arg, "--url") || cli__is_opt(arg, "--redis")) {
        const char *name = cli__is_opt(arg, "--url") ? "--url" : "--redis";
        const char *v = cli__optval(a, arg, name);
        if (v == NULL) {
            *ex = CLI_EX_USAGE;
        } else if (v[0] == '\0') {
            *ex = cli__usage_error(a->cmd, "%s: empty URL", name);
        } else if (cc->url != NULL) {
            *ex = cli__usage_error(a->cmd, "%s: the URL was given already (%s): give it once",
                                   name, cc->url_opt);
        } else {
            /* Blank a password in our argv at once (a->argv[a->i] is v's
             * argument, "--url=URL" or "URL"). */
            cc->url = cli__url_from_argv(a->argv[a->i] + (v - a->argv[a->i]));
            cc->url_opt = name;
        }
        return 1;
    }
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        if (cli__is_opt(arg, files[i].name)) {
            const char *v = conn_val(a, arg, files[i].name, ex);
            *(const char **)(void *)((char *)cc + files[i].off) = v;
            return 1;
        }
    }
    return 0;
}

/* A value from the command line, else from $env (an empty one is unset;
 * env NULL: none). */
static const char *or_env(const char *given, const char *env)
{
    if (given != NULL || env == NULL) {
        return given;
    }
    const char *v = getenv(env);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

int cli__conn_open(const char *cmd, const cli__conn *cc, fence_client_options *o,
                   fence_client **out)
{
    *out = NULL;
    o->url = cli__url(cc->url);
    /* The FENCE_REDIS_* variables are defaults for Redis URLs: set for every
     * job, they must not be taken for options of another issuer (which would
     * refuse them). */
    const char *issuer = fence_url_issuer(o->url);
    int redis = issuer == NULL || strcmp(issuer, "redis") == 0;
    const char *pw = redis ? cli__env_password() : NULL;
    const char *spw = redis ? cli__env_sentinel_password() : NULL;
    int ex = CLI_EX_OK;
    if (cc->password_file != NULL) {
        ex = cli__read_secret(cmd, "--password-file", cc->password_file, &pw);
    }
    if (ex == CLI_EX_OK && cc->sentinel_password_file != NULL) {
        ex = cli__read_secret(cmd, "--sentinel-password-file", cc->sentinel_password_file, &spw);
    }
    if (ex != CLI_EX_OK) {
        return ex;
    }
    o->password = pw;
    /* The variable may be set for every job: it applies to Sentinel URLs
     * only.  A --sentinel-password-file with another URL is refused (64). */
    if (cc->sentinel_password_file != NULL ||
        strncmp(o->url, "redis-sentinel://", 17) == 0) {
        o->sentinel_password = spw;
    }
    o->tls = cc->tls;
    o->tls_insecure = cc->insecure;
    o->tls_cert_file = or_env(cc->cert, redis ? "FENCE_REDIS_CERT" : NULL);
    o->tls_key_file = or_env(cc->key, redis ? "FENCE_REDIS_KEY" : NULL);
    if (cc->insecure) {
        /* An explicit --insecure wins over the environment's CA and name
         * (defaults, perhaps set for every job); on the command line they
         * contradict it. */
        if (cc->cacert != NULL || cc->cacertdir != NULL || cc->sni != NULL) {
            fprintf(stderr, "fence %s: --insecure turns certificate verification off: it cannot "
                    "go with --cacert, --cacertdir or --sni\n", cmd);
            return CLI_EX_USAGE;
        }
    } else {
        o->tls_ca_file = or_env(cc->cacert, redis ? "FENCE_REDIS_CACERT" : NULL);
        o->tls_ca_dir = or_env(cc->cacertdir, redis ? "FENCE_REDIS_CACERTDIR" : NULL);
        o->tls_server_name = or_env(cc->sni, redis ? "FENCE_REDIS_SNI" : NULL);
    }
    if (cc->insecure && (cc->tls || strncmp(o->url, "rediss://", 9) == 0)) {
        fprintf(stderr, "fence %s: warning: --insecure: the server's TLS certificate is not "
                "verified; anyone on the path can pose as the server\n", cmd);
    }
    return cli__open(cmd, o, out);
}
