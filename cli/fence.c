/*
 * fence.c -- the `fence` command: run a command under a lease with a
 * fencing token, and look at leases.  main() dispatches to the
 * subcommands in run.c and info.c.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: fence run [OPTIONS] NAME -- COMMAND [ARGS...]\n"
    "       fence status [CONNECTION OPTIONS] [--json] NAME\n"
    "       fence token [CONNECTION OPTIONS] [--raise N] NAME\n"
    "       fence help [COMMAND] | --help | --version\n"
    "\n"
    "  run     take the lease NAME, run COMMAND with FENCE_TOKEN, FENCE_NAME and\n"
    "          FENCE_HOLDER in its environment, keep the lease alive while it runs, stop it\n"
    "          if the lease is lost (exit 76), release the lease when it ends\n"
    "  status  whether NAME is held, its TTL, the holder's and the last token\n"
    "  token   the last fencing token issued for NAME (0 if none)\n"
    "\n"
    "Server: --url URL (or --redis URL), else $FENCE_URL, else $FENCE_REDIS_URL, else\n"
    CLI_DEFAULT_URL "; the URL's scheme names the issuer (Redis, PostgreSQL).\n"
    "Password: --password-file FILE or $FENCE_REDIS_PASSWORD (not in the URL:\n"
    "others can see a command line).  TLS: --tls (or rediss://), --cacert FILE,\n"
    "--cacertdir DIR, --cert FILE, --key FILE, --sni NAME, --insecure.\n"
    "Exit status: 0 ok, 64 usage, 69 the server unreachable, 75 lease held elsewhere\n"
    "(-E), 76 lease lost, 78 Redis may evict leases (maxmemory-policy), or the name's\n"
    "counter is another token mode's; `fence run` otherwise exits with the command's\n"
    "status.\n"
    "'fence help run' tells more.\n";

static const char *help_for(const char *cmd)
{
    if (strcmp(cmd, "run") == 0) {
        return cli__run_help;
    }
    if (strcmp(cmd, "status") == 0) {
        return cli__status_help;
    }
    if (strcmp(cmd, "token") == 0) {
        return cli__token_help;
    }
    return NULL;
}

static int dispatch(int argc, char **argv);

int main(int argc, char **argv)
{
    /* First, before anything opens a descriptor or changes a signal.
     * Started with 0, 1 or 2 closed (cron, daemons), the first pipes would
     * take their numbers and stderr would write into fence's own signal
     * pipe: give them /dev/null instead (the command gets it too). */
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int nul = open("/dev/null", O_RDWR);
            if (nul >= 0 && nul != fd) {
                close(nul); /* cannot happen: open takes the lowest free */
            }
        }
    }
    cli__fds_snapshot();
    cli__dispositions_snapshot();
    cli__secrets_init();
    int ex = dispatch(argc, argv);
    cli__secrets_free();
    cli__fds_free();
    return ex;
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return CLI_EX_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        fputs(usage, stdout);
        return CLI_EX_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("fence %s\n", FENCE_VERSION_STRING);
        return CLI_EX_OK;
    }
    if (strcmp(cmd, "help") == 0) {
        if (argc < 3) {
            fputs(usage, stdout);
            return CLI_EX_OK;
        }
        const char *h = help_for(argv[2]);
        if (h == NULL) {
            return cli__usage_error(NULL, "no such command '%s'", argv[2]);
        }
        fputs(h, stdout);
        return CLI_EX_OK;
    }
    if (strcmp(cmd, "run") == 0) {
        return cli__cmd_run(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "status") == 0) {
        return cli__cmd_status(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "token") == 0) {
        return cli__cmd_token(argc - 1, argv + 1);
    }
    if (cmd[0] == '-') {
        return cli__usage_error(NULL, "unknown option '%s' (options go after the command: "
                                "fence run --ttl 5s NAME -- ...)", cmd);
    }
    return cli__usage_error(NULL, "unknown command '%s' (run, status, token, help)", cmd);
}
