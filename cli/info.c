/* info.c -- `fence status` and `fence token`: looking at a lease without
 * taking it. */
#include "cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const char cli__status_help[] =
    "usage: fence status [--redis URL] [--json] NAME\n"
    "\n"
    "Show whether the lease NAME is held, its remaining TTL, the holder's\n"
    "fencing token, the last token issued, and whether Redis persists its data\n"
    "(persistence: aof, rdb, aof+rdb, off or unknown) and its maxmemory-policy.\n"
    "Exit 0 whether held or free.\n"
    "\n"
    "  --redis URL   Redis to ask (default $FENCE_REDIS_URL, else " CLI_DEFAULT_URL ")\n"
    "  --json        one JSON object: {\"name\", \"redis\", \"state\": \"held\"|\"free\",\n"
    "                \"held\", \"ttl_ms\" (null when free, -1 for a key without expiry),\n"
    "                \"holder_token\" (0 when free or unknown), \"last_token\",\n"
    "                \"persistence\", \"maxmemory_policy\" (null when unknown)}\n";

const char cli__token_help[] =
    "usage: fence token [--redis URL] [--raise N] NAME\n"
    "\n"
    "Print the last fencing token issued for NAME (0 if none yet).\n"
    "\n"
    "  --redis URL   Redis to ask (default $FENCE_REDIS_URL, else " CLI_DEFAULT_URL ")\n"
    "  --raise N     first raise the token counter to at least N (never lowers\n"
    "                it), so the next lease gets a token > N; for a store whose\n"
    "                version column already holds numbers.  Prints the counter.\n";

/* Common walk of "[--redis URL] [--json] [--raise N] NAME". */
typedef struct {
    const char *url;
    const char *name;
    int json;
    int raise;
    uint64_t floor;
} info_args;

static int parse(int argc, char **argv, const char *cmd, int allow_json, int allow_raise,
                 info_args *ia, int *help)
{
    cli__argv a = {argc, argv, 1, cmd};
    int opts_done = 0;
    memset(ia, 0, sizeof *ia);
    *help = 0;
    for (; a.i < argc; a.i++) {
        const char *arg = argv[a.i];
        if (!opts_done && strcmp(arg, "--") == 0) {
            opts_done = 1;
        } else if (!opts_done && (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)) {
            *help = 1;
            return CLI_EX_OK;
        } else if (!opts_done && strncmp(arg, "--redis", 7) == 0 &&
                   (arg[7] == '\0' || arg[7] == '=')) {
            ia->url = cli__optval(&a, arg, "--redis");
            if (ia->url == NULL) {
                return CLI_EX_USAGE;
            }
            if (ia->url[0] == '\0') {
                return cli__usage_error(cmd, "--redis: empty URL");
            }
        } else if (!opts_done && allow_json && strcmp(arg, "--json") == 0) {
            ia->json = 1;
        } else if (!opts_done && allow_raise && strncmp(arg, "--raise", 7) == 0 &&
                   (arg[7] == '\0' || arg[7] == '=')) {
            const char *v = cli__optval(&a, arg, "--raise");
            if (v == NULL) {
                return CLI_EX_USAGE;
            }
            if (cli__parse_u64(v, (uint64_t)INT64_MAX, &ia->floor) != 0) {
                return cli__usage_error(cmd, "--raise: '%s' is not a number from 0 to %" PRId64,
                                        v, INT64_MAX);
            }
            ia->raise = 1;
        } else if (!opts_done && arg[0] == '-' && arg[1] != '\0') {
            return cli__usage_error(cmd, "unknown option '%s'", arg);
        } else if (ia->name == NULL) {
            ia->name = arg;
        } else {
            return cli__usage_error(cmd, "unexpected argument '%s' (one NAME only)", arg);
        }
    }
    if (ia->name == NULL) {
        return cli__usage_error(cmd, "missing the lease NAME");
    }
    return cli__check_name(cmd, ia->name);
}

/* Write s as a JSON string (with quotes). */
static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p);
        } else if (*p < 0x20 || *p == 0x7f) {
            fprintf(f, "\\u%04x", *p);
        } else {
            fputc(*p, f);
        }
    }
    fputc('"', f);
}

/* What `fence status` shows. */
typedef struct {
    int held;
    int64_t pttl;
    uint64_t holder, last;
    fence_server_info si;
} status_view;

static void print_json(const char *name, fence_client *c, const status_view *v)
{
    fputs("{\"name\": ", stdout);
    json_string(stdout, name);
    fputs(", \"redis\": ", stdout);
    json_string(stdout, fence_client_url(c));
    printf(", \"state\": \"%s\", \"held\": %s", v->held ? "held" : "free",
           v->held ? "true" : "false");
    if (v->held) {
        printf(", \"ttl_ms\": %" PRId64, v->pttl);
    } else {
        fputs(", \"ttl_ms\": null", stdout);
    }
    printf(", \"holder_token\": %" PRIu64 ", \"last_token\": %" PRIu64, v->holder, v->last);
    printf(", \"persistence\": \"%s\", \"maxmemory_policy\": ",
           fence_persistence_name(v->si.persistence));
    if (v->si.maxmemory_policy[0] != '\0') {
        json_string(stdout, v->si.maxmemory_policy);
    } else {
        fputs("null", stdout);
    }
    fputs("}\n", stdout);
}

static void print_text(const char *name, fence_client *c, const status_view *v)
{
    printf("name:         %s\n", name);
    printf("redis:        %s\n", fence_client_url(c));
    printf("state:        %s\n", v->held ? "held" : "free");
    if (v->held && v->pttl >= 0) {
        printf("ttl_ms:       %" PRId64 "\n", v->pttl);
    } else if (v->held) {
        printf("ttl_ms:       none (the key has no expiry)\n");
    }
    if (v->held) {
        printf("holder_token: %" PRIu64 "%s\n", v->holder,
               v->holder == 0 ? " (not a fence owner value)" : "");
    }
    printf("last_token:   %" PRIu64 "\n", v->last);
    printf("persistence:  %s%s\n", fence_persistence_name(v->si.persistence),
           v->si.persistence == FENCE_PERSIST_OFF ? " (a restart loses the counters: clock "
                                                    "tokens jump past them)" : "");
    printf("maxmemory_policy: %s\n",
           v->si.maxmemory_policy[0] != '\0' ? v->si.maxmemory_policy : "unknown");
}

int cli__cmd_status(int argc, char **argv)
{
    info_args ia;
    int help;
    int ex = parse(argc, argv, "status", 1, 0, &ia, &help);
    if (help) {
        fputs(cli__status_help, stdout);
        return CLI_EX_OK;
    }
    if (ex != CLI_EX_OK) {
        return ex;
    }
    fence_client *c = NULL;
    ex = cli__open_url("status", cli__redis_url(ia.url), &c);
    if (ex != CLI_EX_OK) {
        return ex;
    }
    status_view v = {0, -1, 0, 0, {"", FENCE_PERSIST_UNKNOWN}};
    int rc = fence_lease_inspect(c, ia.name, &v.held, &v.pttl, &v.holder, &v.last);
    const char *what = "cannot inspect the lease";
    if (rc == FENCE_OK) {
        rc = fence_client_server_info(c, &v.si);
        what = "cannot ask the server about itself";
    }
    if (rc != FENCE_OK) {
        ex = cli__fail("status", c, what, rc);
        fence_client_close(c);
        return ex;
    }
    if (ia.json) {
        print_json(ia.name, c, &v);
    } else {
        print_text(ia.name, c, &v);
    }
    fence_client_close(c);
    if (fflush(stdout) != 0) {
        perror("fence status: stdout");
        return CLI_EX_OSERR;
    }
    return CLI_EX_OK;
}

int cli__cmd_token(int argc, char **argv)
{
    info_args ia;
    int help;
    int ex = parse(argc, argv, "token", 0, 1, &ia, &help);
    if (help) {
        fputs(cli__token_help, stdout);
        return CLI_EX_OK;
    }
    if (ex != CLI_EX_OK) {
        return ex;
    }
    fence_client *c = NULL;
    ex = cli__open_url("token", cli__redis_url(ia.url), &c);
    if (ex != CLI_EX_OK) {
        return ex;
    }
    uint64_t tok = 0;
    int rc = ia.raise ? fence_token_raise(c, ia.name, ia.floor, &tok)
                      : fence_token_last(c, ia.name, &tok);
    if (rc != FENCE_OK) {
        ex = cli__fail("token", c, ia.raise ? "cannot raise the token" : "cannot read the token",
                       rc);
        fence_client_close(c);
        return ex;
    }
    fence_client_close(c);
    printf("%" PRIu64 "\n", tok);
    if (fflush(stdout) != 0) {
        perror("fence token: stdout");
        return CLI_EX_OSERR;
    }
    return CLI_EX_OK;
}
