/* info.c -- `fence status` and `fence token`: looking at a lease without
 * taking it. */
#include "cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const char cli__status_help[] =
    "usage: fence status [CONNECTION OPTIONS] [--json] NAME\n"
    "\n"
    "Show whether the lease NAME is held, its remaining TTL, the holder's\n"
    "fencing token, the last token issued, and what the issuer says of its\n"
    "server: for Redis whether it persists its data (persistence: aof, rdb,\n"
    "aof+rdb, off or unknown) and its maxmemory-policy.\n"
    "For a lease taken by `fence run`, holder_info says who holds it:\n"
    "\"host=<hostname> pid=<fence's pid> since=<UTC time>\".\n"
    "Exit 0 whether held or free.\n"
    "\n"
    "  --json        one JSON object: {\"name\", \"issuer\" (\"redis\"), \"url\", \"redis\"\n"
    "                (the URL, for a Redis issuer), \"state\": \"held\"|\"free\",\n"
    "                \"held\", \"ttl_ms\" (null when free, -1 for a key without expiry),\n"
    "                \"holder_token\" (0 when free or unknown), \"last_token\",\n"
    "                \"holder\" (holder id), \"holder_info\" (null when none),\n"
    "                then what the issuer says of its server, one key each (Redis:\n"
    "                \"persistence\", \"maxmemory_policy\"; null when unknown)};\n"
    "                always valid UTF-8: control bytes as \\u00XX, bytes that are\n"
    "                not UTF-8 as \\ufffd; when it fails (exit 64, 69, ...),\n"
    "                {\"name\", \"state\": \"error\", \"error\" (the message),\n"
    "                \"status\" (\"FENCE_ECONN\", ...; null), \"exit\"}\n"
    "\n" CLI_CONN_HELP;

const char cli__token_help[] =
    "usage: fence token [CONNECTION OPTIONS] [--raise N] NAME\n"
    "\n"
    "Print the last fencing token issued for NAME (0 if none yet).\n"
    "\n"
    "  --raise N     first raise the token counter to at least N (never lowers\n"
    "                it), so the next lease gets a token > N; for a store whose\n"
    "                version column already holds numbers.  Prints the counter.\n"
    "\n" CLI_CONN_HELP;

/* Common walk of "[CONNECTION OPTIONS] [--json] [--raise N] NAME". */
typedef struct {
    cli__conn conn;
    const char *name;
    int json;
    int raise;
    uint64_t floor;
} info_args;

/* --raise N: 0 or the usage error's status. */
static int raise_opt(cli__argv *a, const char *arg, info_args *ia)
{
    const char *v = cli__optval(a, arg, "--raise");
    if (v == NULL) {
        return CLI_EX_USAGE;
    }
    if (cli__parse_u64(v, (uint64_t)INT64_MAX, &ia->floor) != 0) {
        return cli__usage_error(a->cmd, "--raise: '%s' is not a number from 0 to %" PRId64, v,
                                INT64_MAX);
    }
    ia->raise = 1;
    return CLI_EX_OK;
}

static int parse(int argc, char **argv, const char *cmd, int allow_json, int allow_raise,
                 info_args *ia, int *help)
{
    cli__argv a = {argc, argv, 1, cmd};
    int opts_done = 0, ex = CLI_EX_OK;
    memset(ia, 0, sizeof *ia);
    *help = 0;
    for (; a.i < argc; a.i++) {
        const char *arg = argv[a.i];
        if (!opts_done && strcmp(arg, "--") == 0) {
            opts_done = 1;
        } else if (!opts_done && (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)) {
            *help = 1;
            return CLI_EX_OK;
        } else if (!opts_done && cli__conn_opt(&a, arg, &ia->conn, &ex)) {
            /* ex set */
        } else if (!opts_done && allow_json && strcmp(arg, "--json") == 0) {
            ia->json = 1;
        } else if (!opts_done && allow_raise && cli__is_opt(arg, "--raise")) {
            ex = raise_opt(&a, arg, ia);
        } else if (!opts_done && arg[0] == '-' && arg[1] != '\0') {
            return cli__usage_error(cmd, "unknown option '%s'", arg);
        } else if (ia->name == NULL) {
            ia->name = arg;
        } else {
            return cli__usage_error(cmd, "unexpected argument '%s' (one NAME only)", arg);
        }
        if (ex != CLI_EX_OK) {
            return ex;
        }
    }
    if (ia->name == NULL) {
        return cli__usage_error(cmd, "missing the lease NAME");
    }
    return cli__check_name(cmd, ia->name);
}

/* Open the client for ia (default options otherwise). */
static int open_client(const char *cmd, const info_args *ia, fence_client **c)
{
    fence_client_options o;
    fence_client_options_init(&o);
    return cli__conn_open(cmd, &ia->conn, &o, c);
}

/* The length of the well-formed UTF-8 sequence (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF) of 2 to 4 bytes at p; 0 when there is
 * none. */
static int utf8_len(const unsigned char *p)
{
    unsigned char c = p[0];
    unsigned char lo = 0x80, hi = 0xbf;
    int n;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80;
        hi = c == 0xed ? 0x9f : 0xbf;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 0;
    }
    if (p[1] < lo || p[1] > hi) {
        return 0;
    }
    for (int k = 2; k < n; k++) {
        if (p[k] < 0x80 || p[k] > 0xbf) {
            return 0;
        }
    }
    return n;
}

/* Write s as a JSON string (with quotes) that is always valid UTF-8: '"'
 * and '\' escaped, control bytes and DEL as \u00XX, well-formed UTF-8
 * copied, and each byte that is not part of well-formed UTF-8 as \ufffd
 * (the replacement character). */
static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        int n;
        if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p);
        } else if (*p < 0x20 || *p == 0x7f) {
            fprintf(f, "\\u%04x", *p);
        } else if (*p < 0x80) {
            fputc(*p, f);
        } else if ((n = utf8_len(p)) > 0) {
            fwrite(p, 1, (size_t)n, f);
            p += n - 1;
        } else {
            fputs("\\ufffd", f);
        }
    }
    fputc('"', f);
}

/* A JSON string, or null for "". */
static void json_string_or_null(FILE *f, const char *s)
{
    if (s[0] != '\0') {
        json_string(f, s);
    } else {
        fputs("null", f);
    }
}

/* What `fence status` shows. */
typedef struct {
    fence_lease_info li;
    fence_issuer_info ii;
} status_view;

static void print_json(const char *name, const status_view *v)
{
    fputs("{\"name\": ", stdout);
    json_string(stdout, name);
    fputs(", \"issuer\": ", stdout);
    json_string(stdout, v->ii.issuer);
    fputs(", \"url\": ", stdout);
    json_string(stdout, v->ii.url);
    if (strcmp(v->ii.issuer, "redis") == 0) {
        fputs(", \"redis\": ", stdout);
        json_string(stdout, v->ii.url);
    }
    const fence_lease_info *li = &v->li;
    printf(", \"state\": \"%s\", \"held\": %s", li->held ? "held" : "free",
           li->held ? "true" : "false");
    if (li->held) {
        printf(", \"ttl_ms\": %" PRId64, li->pttl_ms);
    } else {
        fputs(", \"ttl_ms\": null", stdout);
    }
    printf(", \"holder_token\": %" PRIu64 ", \"last_token\": %" PRIu64, li->holder_token,
           li->last_token);
    fputs(", \"holder\": ", stdout);
    json_string_or_null(stdout, li->holder);
    fputs(", \"holder_info\": ", stdout);
    json_string_or_null(stdout, li->holder_info);
    for (int i = 0; i < v->ii.nfields; i++) {
        fputs(", ", stdout);
        json_string(stdout, v->ii.field[i].key);
        fputs(": ", stdout);
        json_string_or_null(stdout, v->ii.field[i].value);
    }
    fputs("}\n", stdout);
}

/* "key:" padded to the values' column. */
static void put_key(const char *key)
{
    int pad = 13 - (int)strlen(key);
    printf("%s:%*s", key, pad > 1 ? pad : 1, "");
}

/* --json when fence status failed (Redis unreachable, refused, ...): still
 * one JSON object on stdout, {"name", "state": "error", "error" (the
 * message stderr got), "status" (e.g. "FENCE_ECONN", null when it was no
 * library call), "exit"}. */
static void print_json_error(const char *name, int ex)
{
    const char *msg = "";
    int st = cli__last_failure(&msg);
    fputs("{\"name\": ", stdout);
    json_string(stdout, name);
    fputs(", \"state\": \"error\", \"error\": ", stdout);
    json_string(stdout, msg[0] != '\0' ? msg : "see stderr");
    if (st >= 0) {
        printf(", \"status\": \"%s\"", fence_status_name(st));
    } else {
        fputs(", \"status\": null", stdout);
    }
    printf(", \"exit\": %d}\n", ex);
    fflush(stdout);
}

static void print_text(const char *name, const status_view *v)
{
    printf("name:         %s\n", name);
    printf("issuer:       %s\n", v->ii.issuer);
    printf("%s        %s\n", strcmp(v->ii.issuer, "redis") == 0 ? "redis:" : "url:  ", v->ii.url);
    const fence_lease_info *li = &v->li;
    printf("state:        %s\n", li->held ? "held" : "free");
    if (li->held && li->pttl_ms >= 0) {
        printf("ttl_ms:       %" PRId64 "\n", li->pttl_ms);
    } else if (li->held) {
        printf("ttl_ms:       none (the key has no expiry)\n");
    }
    if (li->held) {
        printf("holder_token: %" PRIu64 "%s\n", li->holder_token,
               li->holder_token == 0 ? " (not a fence owner value)" : "");
    }
    if (li->holder[0] != '\0') {
        printf("holder:       %s\n", li->holder);
    }
    if (li->holder_info[0] != '\0') {
        fputs("holder_info:  ", stdout);
        cli__put_printable(stdout, li->holder_info);
        fputc('\n', stdout);
    }
    printf("last_token:   %" PRIu64 "\n", li->last_token);
    for (int i = 0; i < v->ii.nfields; i++) {
        const struct fence_issuer_field *f = &v->ii.field[i];
        put_key(f->key);
        cli__put_printable(stdout, f->value[0] != '\0' ? f->value : "unknown");
        if (f->note[0] != '\0') {
            fputs(" (", stdout);
            cli__put_printable(stdout, f->note);
            fputc(')', stdout);
        }
        fputc('\n', stdout);
    }
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
    ex = open_client("status", &ia, &c);
    if (ex != CLI_EX_OK) {
        if (ia.json) {
            print_json_error(ia.name, ex);
        }
        return ex;
    }
    status_view v;
    memset(&v, 0, sizeof v);
    int rc = fence_lease_inspect_info(c, ia.name, &v.li);
    const char *what = "cannot inspect the lease";
    if (rc == FENCE_OK) {
        rc = fence_client_describe(c, &v.ii);
        what = "cannot ask the server about itself";
    }
    if (rc != FENCE_OK) {
        ex = cli__fail("status", c, what, rc);
        fence_client_close(c);
        if (ia.json) {
            print_json_error(ia.name, ex);
        }
        return ex;
    }
    if (ia.json) {
        print_json(ia.name, &v);
    } else {
        print_text(ia.name, &v);
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
    ex = open_client("token", &ia, &c);
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
