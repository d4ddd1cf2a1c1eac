/* asyncutil.c -- see asyncutil.h. */
#include "asyncutil.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

void au_on_acquired(fence_async *a, fence_status st, fence_lease *lease, int64_t pttl_ms,
                    const char *msg, void *user)
{
    (void)a;
    au_acq *r = user;
    r->calls++;
    r->st = st;
    r->lease = lease;
    r->pttl_ms = pttl_ms;
    snprintf(r->msg, sizeof r->msg, "%s", msg != NULL ? msg : "(null)");
}

void au_on_released(fence_async *a, fence_status st, const char *msg, void *user)
{
    (void)a;
    au_rel *r = user;
    r->calls++;
    r->st = st;
    snprintf(r->msg, sizeof r->msg, "%s", msg != NULL ? msg : "(null)");
}

int64_t au_run(fence_async *a, const int *flag, int64_t max_ms)
{
    int64_t start = tu_now_ms(), end = start + max_ms;
    while ((flag == NULL || *flag == 0) && tu_now_ms() < end) {
        int64_t left = end - tu_now_ms(), to = fence_async_timeout_ms(a);
        if (to < 0 || to > left) {
            to = left;
        }
        struct pollfd p = {fence_async_fd(a), 0, 0};
        int ev = fence_async_events(a);
        p.events = (short)((ev & FENCE_ASYNC_READ ? POLLIN : 0) |
                           (ev & FENCE_ASYNC_WRITE ? POLLOUT : 0));
        int n = poll(&p, p.fd >= 0 ? 1 : 0, (int)to);
        int got = n > 0 ? ((p.revents & (POLLIN | POLLHUP | POLLERR)) ? FENCE_ASYNC_READ : 0) |
                              ((p.revents & POLLOUT) ? FENCE_ASYNC_WRITE : 0)
                        : 0;
        ck_assert_int_eq(fence_async_handle(a, got), FENCE_OK);
    }
    return tu_now_ms() - start;
}

fence_async *au_open(const char *url, int dense)
{
    fence_client_options o;
    fence_client_options_init(&o);
    o.url = url;
    o.token_mode = dense ? FENCE_TOKENS_DENSE : FENCE_TOKENS_CLOCK;
    fence_async *a = NULL;
    fence_status st = fence_async_open(&a, &o);
    ck_assert_msg(st == FENCE_OK, "fence_async_open(%s): %s: %s", url, fence_status_name(st),
                  fence_async_errmsg(a));
    return a;
}

au_acq au_acquire(fence_async *a, const char *name, int64_t ttl_ms, lu_lost *lr)
{
    au_acq r;
    memset(&r, 0, sizeof r);
    fence_lease_options lo;
    fence_lease_options_init(&lo, ttl_ms);
    if (lr != NULL) {
        lo.on_lost = lu_on_lost;
        lo.user = lr;
    }
    fence_status st = fence_async_acquire(a, name, &lo, au_on_acquired, &r);
    ck_assert_msg(st == FENCE_OK, "fence_async_acquire: %s: %s", fence_status_name(st),
                  fence_async_errmsg(a));
    au_run(a, &r.calls, 5000);
    ck_assert_msg(r.calls == 1, "the acquire callback came %d times in 5 s", r.calls);
    return r;
}

au_rel au_release(fence_async *a, fence_lease *l)
{
    au_rel r;
    memset(&r, 0, sizeof r);
    ck_assert_int_eq(fence_async_release(a, l, au_on_released, &r), FENCE_OK);
    au_run(a, &r.calls, 5000);
    ck_assert_msg(r.calls == 1, "the release callback came %d times in 5 s", r.calls);
    return r;
}

int au_unix_start(char *sock, size_t n)
{
    char dir[] = "/tmp/fence-async-unix.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sock, n, "%s/redis.sock", dir);
    char *argv[] = {"redis-server", "--port", "0", "--unixsocket", sock, "--unixsocketperm",
                    "700", "--dir", dir, "--save", "", "--appendonly", "no",
                    "--daemonize", "no", "--loglevel", "warning", NULL};
    pid_t pid = 0;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    int err = posix_spawnp(&pid, "redis-server", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    ck_assert_msg(err == 0, "cannot start redis-server on a unix socket: %s", strerror(err));
    for (int i = 0; i < 500; i++) {
        redisContext *r = redisConnectUnix(sock);
        int up = r != NULL && r->err == 0;
        redisFree(r);
        if (up) {
            return pid;
        }
        tu_sleep_ms(10);
    }
    au_unix_stop(pid, sock);
    ck_abort_msg("redis-server on %s did not come up in 5 s", sock);
    return -1;
}

void au_unix_stop(int pid, const char *sock)
{
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    unlink(sock);
    char dir[300];
    snprintf(dir, sizeof dir, "%s", sock);
    char *slash = strrchr(dir, '/');
    if (slash != NULL) {
        *slash = '\0';
        rmdir(dir);
    }
}

/* A port nobody listens on now (bound to 0, then closed). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    ck_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
              getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    close(fd);
    return ntohs(sa.sin_port);
}

void au_relay_start(au_relay *r, int target_port, int delay_ms)
{
    const char *b = getenv("FENCE_BUILD");
    char bin[512], file[128], lport[16], tport[16];
    snprintf(bin, sizeof bin, "%s/tests/net/delay_relay", b != NULL && b[0] ? b : "build");
    ck_assert_msg(access(bin, X_OK) == 0, "%s is missing: make tests-build", bin);
    snprintf(r->dir, sizeof r->dir, "/tmp/fence-relay.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(r->dir));
    snprintf(file, sizeof file, "%s/delay", r->dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%d\n", delay_ms);
    fclose(f);
    r->port = free_port();
    snprintf(lport, sizeof lport, "%d", r->port);
    snprintf(tport, sizeof tport, "%d", target_port);
    int out[2];
    ck_assert_int_eq(pipe(out), 0);
    char *argv[] = {bin, "127.0.0.1", lport, "127.0.0.1", tport, file, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    pid_t pid = 0;
    int err = posix_spawn(&pid, bin, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    ck_assert_msg(err == 0, "cannot start %s: %s", bin, strerror(err));
    r->pid = pid;
    char line[16] = "";
    struct pollfd p = {out[0], POLLIN, 0};
    ssize_t n = poll(&p, 1, 5000) == 1 ? read(out[0], line, sizeof line - 1) : -1;
    close(out[0]);
    ck_assert_msg(n > 0 && strncmp(line, "ready", 5) == 0, "the relay did not start");
}

void au_relay_stop(au_relay *r)
{
    kill(r->pid, SIGTERM);
    int st;
    waitpid(r->pid, &st, 0);
    char file[128];
    snprintf(file, sizeof file, "%s/delay", r->dir);
    unlink(file);
    rmdir(r->dir);
}
