/*
 * delay_relay.c -- a TCP relay that delays every chunk it forwards, in each
 * direction, by the number of milliseconds in a file: the network latency
 * of the suites in tests/net on a kernel without tc netem (sch_netem).
 * Not a test by itself.
 *
 *   delay_relay LISTEN_IP PORT TARGET_IP PORT DELAY_FILE
 *
 * Listens on LISTEN_IP:PORT; each connection accepted gets a connection of
 * its own to TARGET_IP:PORT.  A chunk read from either side is written to
 * the other DELAY ms after it was read, DELAY being what DELAY_FILE says
 * when it is read (a missing or empty file: 0), so that a suite changes the
 * latency of connections already open by rewriting the file.  Order is
 * kept: a chunk never overtakes the one before it, also when the delay
 * goes down.  An end of stream is passed on (shutdown) after the data before
 * it; an error on either side closes both.  Prints "ready" once listening.
 * One thread, poll(), non-blocking sockets.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAIRS 64
#define CHUNK 16384

typedef struct chunk {
    struct chunk *next;
    int64_t due_us;
    size_t len, off;
    char data[];
} chunk;

/* One direction of a pair: what was read from `from`, waiting to go out. */
typedef struct {
    chunk *head, *tail;
    int64_t last_due; /* the due time of the last chunk queued: order is kept */
    int eof;          /* `from` ended: shut `to` down once the queue is empty */
    int shut;         /* done */
} flow;

typedef struct {
    int fd[2];  /* 0: the client, 1: the target */
    flow f[2];  /* f[i]: from fd[i] to fd[1 - i] */
    int used;
} pair;

static pair pairs[MAX_PAIRS];
static const char *delay_file;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t delay_us(void)
{
    FILE *f = fopen(delay_file, "r");
    long d = 0;
    if (f != NULL) {
        if (fscanf(f, "%ld", &d) != 1 || d < 0) {
            d = 0;
        }
        fclose(f);
    }
    return (int64_t)d * 1000;
}

static void die(const char *what)
{
    fprintf(stderr, "delay_relay: %s: %s\n", what, strerror(errno));
    exit(1);
}

static struct sockaddr_in addr_of(const char *ip, const char *port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)atoi(port));
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
        fprintf(stderr, "delay_relay: not an IPv4 address: %s\n", ip);
        exit(64);
    }
    return a;
}

static void nonblock(int fd)
{
    int one = 1;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void close_pair(pair *p)
{
    for (int i = 0; i < 2; i++) {
        close(p->fd[i]);
        chunk *c = p->f[i].head;
        while (c != NULL) {
            chunk *n = c->next;
            free(c);
            c = n;
        }
    }
    memset(p, 0, sizeof *p);
}

static void open_pair(int lfd, const struct sockaddr_in *target)
{
    int cfd = accept(lfd, NULL, NULL);
    if (cfd < 0) {
        return;
    }
    pair *p = NULL;
    for (int i = 0; i < MAX_PAIRS && p == NULL; i++) {
        if (!pairs[i].used) {
            p = &pairs[i];
        }
    }
    /* The target is local to the relay: a blocking connect is immediate. */
    int tfd = p != NULL ? socket(AF_INET, SOCK_STREAM, 0) : -1;
    if (tfd < 0 || connect(tfd, (const struct sockaddr *)target, sizeof *target) != 0) {
        if (tfd >= 0) {
            close(tfd);
        }
        close(cfd);
        return;
    }
    nonblock(cfd);
    nonblock(tfd);
    memset(p, 0, sizeof *p);
    p->used = 1;
    p->fd[0] = cfd;
    p->fd[1] = tfd;
}

/* Read what fd[i] has into f[i]'s queue.  -1: close the pair. */
static int read_side(pair *p, int i)
{
    char buf[CHUNK];
    ssize_t n = read(p->fd[i], buf, sizeof buf);
    if (n < 0) {
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    }
    flow *f = &p->f[i];
    if (n == 0) {
        f->eof = 1;
        return 0;
    }
    chunk *c = malloc(sizeof *c + (size_t)n);
    if (c == NULL) {
        return -1;
    }
    memcpy(c->data, buf, (size_t)n);
    c->len = (size_t)n;
    c->off = 0;
    c->next = NULL;
    c->due_us = now_us() + delay_us();
    if (c->due_us < f->last_due) {
        c->due_us = f->last_due;
    }
    f->last_due = c->due_us;
    if (f->tail != NULL) {
        f->tail->next = c;
    } else {
        f->head = c;
    }
    f->tail = c;
    return 0;
}

/* Write f[i]'s due chunks to fd[1 - i].  -1: close the pair. */
static int write_side(pair *p, int i, int64_t now)
{
    flow *f = &p->f[i];
    while (f->head != NULL && f->head->due_us <= now) {
        chunk *c = f->head;
        ssize_t n = write(p->fd[1 - i], c->data + c->off, c->len - c->off);
        if (n < 0) {
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        }
        c->off += (size_t)n;
        if (c->off < c->len) {
            return 0;
        }
        f->head = c->next;
        if (f->head == NULL) {
            f->tail = NULL;
        }
        free(c);
    }
    if (f->head == NULL && f->eof && !f->shut) {
        shutdown(p->fd[1 - i], SHUT_WR);
        f->shut = 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: delay_relay LISTEN_IP PORT TARGET_IP PORT DELAY_FILE\n");
        return 64;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the suite */
    signal(SIGPIPE, SIG_IGN);
    struct sockaddr_in listen_at = addr_of(argv[1], argv[2]);
    struct sockaddr_in target = addr_of(argv[3], argv[4]);
    delay_file = argv[5];
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    if (lfd < 0) {
        die("socket");
    }
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, (const struct sockaddr *)&listen_at, sizeof listen_at) != 0) {
        die("bind");
    }
    if (listen(lfd, 64) != 0) {
        die("listen");
    }
    printf("ready\n");
    fflush(stdout);

    for (;;) {
        struct pollfd pfd[1 + 2 * MAX_PAIRS];
        int who[1 + 2 * MAX_PAIRS];
        int n = 0;
        int64_t now = now_us(), next = -1;
        pfd[n].fd = lfd;
        pfd[n].events = POLLIN;
        who[n++] = -1;
        for (int k = 0; k < MAX_PAIRS; k++) {
            pair *p = &pairs[k];
            if (!p->used) {
                continue;
            }
            for (int i = 0; i < 2; i++) {
                flow *f = &p->f[i], *back = &p->f[1 - i];
                short ev = 0;
                if (!f->eof) {
                    ev |= POLLIN; /* more from fd[i] */
                }
                if (back->head != NULL && back->head->due_us <= now) {
                    ev |= POLLOUT; /* something due for fd[i] */
                }
                if (back->head != NULL && back->head->due_us > now &&
                    (next < 0 || back->head->due_us < next)) {
                    next = back->head->due_us;
                }
                pfd[n].fd = p->fd[i];
                pfd[n].events = ev;
                who[n++] = k * 2 + i;
            }
        }
        int timeout = next < 0 ? -1 : (int)((next - now + 999) / 1000);
        if (poll(pfd, (nfds_t)n, timeout) < 0 && errno != EINTR) {
            die("poll");
        }
        if (pfd[0].revents & POLLIN) {
            open_pair(lfd, &target);
        }
        now = now_us();
        for (int j = 1; j < n; j++) {
            pair *p = &pairs[who[j] / 2];
            int i = who[j] % 2;
            if (!p->used) {
                continue; /* closed by its other side in this round */
            }
            int bad = 0;
            if (pfd[j].revents & (POLLIN | POLLHUP | POLLERR)) {
                bad = read_side(p, i) != 0;
            }
            /* Due chunks for fd[i] go out whether poll said POLLOUT or
             * the timeout brought them due. */
            if (!bad) {
                bad = write_side(p, 1 - i, now) != 0;
            }
            if (bad || (p->f[0].shut && p->f[1].shut)) {
                close_pair(p);
            }
        }
    }
}
