/*
 * filestore.c -- a fenced file store: the write gate (fence_gate.h) in
 * front of a plain folder of files.
 *
 * What it shows: a store that knows nothing about leases can still refuse
 * a stale writer.  Each put carries the fencing token of the writer's
 * lease; the file only replaces the current one inside the gate's
 * begin/commit, so a writer whose lease was taken over (an older token)
 * never replaces a file written by the newer holder, even if it wakes up
 * and writes late.
 *
 *   filestore DIR put KEY TOKEN [HOLDER] < data
 *                                        store stdin as KEY, fenced by TOKEN
 *   filestore DIR get KEY                print KEY's data
 *   filestore DIR mark KEY               print KEY's high-water mark
 *
 * TOKEN is the writer's fencing token: decimal digits, no sign, no spaces,
 * no leading zero, 1..2^63-1 (the one token grammar of fence).  HOLDER is
 * who writes with it: the lease's holder id, 32 lowercase hex digits; it
 * defaults to $FENCE_HOLDER (which `fence run` exports), and unset or
 * empty means none.  An equal token is admitted only from the holder that
 * wrote with it before, so a token issued twice (after a Redis failover)
 * does not let a second holder in.
 *
 * Exit status: 0 done, 1 error, 2 usage (also a malformed HOLDER), 3 stale
 * (a newer token already wrote KEY, or this token from another holder;
 * nothing changed), 4 timeout (KEY stayed busy), 5 no such KEY, 6 no valid
 * token (missing, malformed or 0: fail closed).
 * FILESTORE_WAIT_MS (default 5000) bounds the wait for a busy store.
 *
 * How a put works:
 *   1. The data is copied to a temp file in DIR and fsync'ed, before the
 *      gate is entered, so a slow client never holds the store.
 *   2. fence_gate_begin(KEY, TOKEN, HOLDER): waits while another put holds
 *      the store, and refuses TOKEN if a newer one was committed, or the
 *      same one by another holder.
 *   3. Also refused if the current file carries a newer token, or the same
 *      token by another holder (see below).
 *   4. rename(temp, KEY) -- atomic: readers see the old file or the new
 *      one, never half of either -- and fsync DIR so the rename is durable.
 *   5. fence_gate_commit() records TOKEN.  Any failure before that aborts
 *      (nothing recorded) and removes the temp file.
 * Every file starts with a line "FENCE <token>\n", or "FENCE <token>
 * <holder>\n" when written by a holder.  That closes the one
 * window the gate cannot: a put killed after its rename but before its
 * commit leaves a file whose token the gate never recorded; step 3 still
 * refuses an older writer.  The gate's marks live in DIR/.fence-gate.db
 * (persistent, shared by every process using DIR).
 */
#include "fence_gate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
    EXIT_DONE = 0,
    EXIT_ERROR = 1,
    EXIT_USAGE = 2,
    EXIT_STALE = 3,
    EXIT_TIMEOUT = 4,
    EXIT_NOTFOUND = 5,
    EXIT_NOTOKEN = 6
};

#define KEY_MAX 200
#define HOLDER_LEN 32  /* FENCE_HOLDER_LEN */
#define HEADER_MAX 64  /* "FENCE " + 19 digits + " " + 32 hex + "\n" */

static void usage(void)
{
    fprintf(stderr, "usage: filestore DIR put KEY TOKEN [HOLDER] < data\n"
                    "       filestore DIR get KEY\n"
                    "       filestore DIR mark KEY\n"
                    "KEY: 1-%d of [A-Za-z0-9._-], not starting with '.'\n"
                    "TOKEN: the fencing token, 1..9223372036854775807 (digits only, no\n"
                    "       sign, spaces or leading zero)\n"
                    "HOLDER: the writer's holder id, %d lowercase hex digits; default\n"
                    "       $FENCE_HOLDER (exported by `fence run`); unset or empty: none\n",
            KEY_MAX, HOLDER_LEN);
}

/* Keys are file names: no '/', no "..", nothing hidden. */
static int valid_key(const char *key)
{
    size_t n = strlen(key);
    if (n == 0 || n > KEY_MAX || key[0] == '.') {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = key[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        if (!ok) {
            return 0;
        }
    }
    return 1;
}

/* A token as fence writes it everywhere: decimal digits, no sign, no
 * spaces, no leading zero, 1..2^63-1 (INT64_MAX).  The first len bytes of
 * s.  0, or -1 for anything else ("007", "+7", " 7", "0", 2^63). */
static int parse_token(const char *s, size_t len, uint64_t *out)
{
    if (len == 0 || len > 19 || s[0] < '1' || s[0] > '9') {
        return -1;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -1;
        }
        unsigned d = (unsigned)(s[i] - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10) {
            return -1;
        }
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* A holder id: exactly HOLDER_LEN lowercase hex digits (the first len
 * bytes of s). */
static int valid_holder(const char *s, size_t len)
{
    if (len != HOLDER_LEN) {
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        if ((s[i] < '0' || s[i] > '9') && (s[i] < 'a' || s[i] > 'f')) {
            return 0;
        }
    }
    return 1;
}

static int write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Copy fd `from` to fd `to` until EOF. */
static int copy_fd(int from, int to)
{
    char buf[65536];
    for (;;) {
        ssize_t r = read(from, buf, sizeof buf);
        if (r == 0) {
            return 0;
        }
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        if (write_all(to, buf, (size_t)r) != 0) {
            return -1;
        }
    }
}

/*
 * Open DIR/KEY and read its header.  Returns the fd positioned after the
 * header with *token and holder ("" if none) set, or -1 with *token 0 and
 * errno ENOENT when there is no such file, or -1 with errno EINVAL when it
 * is not a store file.
 */
static int open_stored(int dirfd, const char *key, uint64_t *token, char holder[HOLDER_LEN + 1])
{
    *token = 0;
    holder[0] = '\0';
    int fd = openat(dirfd, key, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    char head[HEADER_MAX + 1];
    size_t n = 0;
    while (n < HEADER_MAX) { /* byte by byte: stop right after the '\n' */
        ssize_t r = read(fd, head + n, 1);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0 || head[n++] == '\n') {
            break;
        }
    }
    head[n] = '\0';
    if (n < 8 || strncmp(head, "FENCE ", 6) != 0 || head[n - 1] != '\n') {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    head[n - 1] = '\0';
    const char *tok = head + 6, *sp = strchr(tok, ' ');
    size_t tlen = sp != NULL ? (size_t)(sp - tok) : strlen(tok);
    if (parse_token(tok, tlen, token) != 0 || (sp != NULL && !valid_holder(sp + 1, strlen(sp + 1)))) {
        close(fd);
        *token = 0;
        errno = EINVAL;
        return -1;
    }
    if (sp != NULL) {
        memcpy(holder, sp + 1, HOLDER_LEN + 1);
    }
    return fd;
}

static int status_exit(int rc)
{
    switch (rc) {
    case FENCE_OK:
        return EXIT_DONE;
    case FENCE_STALE:
        return EXIT_STALE;
    case FENCE_TIMEOUT:
        return EXIT_TIMEOUT;
    case FENCE_ENOTOKEN:
        return EXIT_NOTOKEN;
    case FENCE_EINVAL:
        return EXIT_USAGE;
    default:
        return EXIT_ERROR;
    }
}

static int open_gate(const char *dir, fence_gate **g)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/.fence-gate.db", dir) >= (int)sizeof path) {
        fprintf(stderr, "filestore: path too long\n");
        return FENCE_EINVAL;
    }
    fence_gate_options o;
    fence_gate_options_init(&o);
    o.path = path;
    const char *w = getenv("FILESTORE_WAIT_MS");
    if (w != NULL && w[0] != '\0') {
        o.wait_ms = strtoll(w, NULL, 10);
    }
    int rc = fence_gate_open(g, &o);
    if (rc != FENCE_OK) {
        fprintf(stderr, "filestore: cannot open the gate: %s: %s\n", fence_strerror(rc),
                fence_gate_errmsg(*g));
    }
    return rc;
}

/* Step 1 of a put: TOKEN's header and stdin to a new temp file in DIR
 * (rename is atomic only within one file system), fsync'ed before anyone
 * can see it.  Its name goes to tmp.  0, or -1 with a message printed. */
static int write_temp(const char *dir, const char *key, uint64_t token, const char *holder,
                      char *tmp, size_t size)
{
    snprintf(tmp, size, "%s/.tmp-%s-XXXXXX", dir, key);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "filestore: cannot create a temp file in %s: %s\n", dir,
                strerror(errno));
        return -1;
    }
    char head[HEADER_MAX];
    int hn = snprintf(head, sizeof head, "FENCE %llu%s%s\n", (unsigned long long)token,
                      holder != NULL ? " " : "", holder != NULL ? holder : "");
    if (write_all(fd, head, (size_t)hn) != 0 || copy_fd(STDIN_FILENO, fd) != 0 ||
        fchmod(fd, 0644) != 0 || fsync(fd) != 0) {
        fprintf(stderr, "filestore: cannot write %s: %s\n", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        return -1;
    }
    close(fd);
    return 0;
}

/* The put of the usage text (holder NULL: none).  Returns an exit status. */
static int put(const char *dir, int dirfd, const char *key, uint64_t token, const char *holder)
{
    fence_gate *g = NULL;
    int rc = open_gate(dir, &g);
    if (rc != FENCE_OK) {
        fence_gate_close(g);
        return status_exit(rc);
    }

    /* 1. Data to a temp file, before the gate is entered. */
    char tmp[PATH_MAX];
    if (write_temp(dir, key, token, holder, tmp, sizeof tmp) != 0) {
        fence_gate_close(g);
        return EXIT_ERROR;
    }

    /* 2. Enter the gate. */
    fence_gate_txn *txn = NULL;
    rc = fence_gate_begin(g, key, token, holder, &txn, NULL);
    if (rc != FENCE_OK) {
        fprintf(stderr, "filestore: put %s refused: %s: %s\n", key, fence_strerror(rc),
                fence_gate_errmsg(g));
        unlink(tmp);
        fence_gate_close(g);
        return status_exit(rc);
    }

    /* 3. The token in the current file, in case its writer died before
     *    committing (see the top of this file). */
    int ex = EXIT_DONE;
    uint64_t cur = 0;
    char cur_holder[HOLDER_LEN + 1];
    int cfd = open_stored(dirfd, key, &cur, cur_holder);
    if (cfd >= 0) {
        close(cfd);
    } else if (errno != ENOENT) {
        fprintf(stderr, "filestore: %s/%s exists but is not a filestore file; not replacing "
                        "it\n", dir, key);
        ex = EXIT_ERROR;
    }
    if (ex == EXIT_DONE && cur > token) {
        fprintf(stderr, "filestore: put %s refused: stale token %llu: the file holds token "
                        "%llu\n", key, (unsigned long long)token, (unsigned long long)cur);
        ex = EXIT_STALE;
    } else if (ex == EXIT_DONE && cur == token &&
               strcmp(cur_holder, holder != NULL ? holder : "") != 0) {
        fprintf(stderr, "filestore: put %s refused: repeated token %llu: the file holds it "
                        "from %s%s\n", key, (unsigned long long)token,
                cur_holder[0] ? "holder " : "no holder", cur_holder);
        ex = EXIT_STALE;
    }

    /* 4. Make it visible, durably. */
    char dst[PATH_MAX];
    snprintf(dst, sizeof dst, "%s/%s", dir, key);
    int renamed = 0;
    if (ex == EXIT_DONE) {
        if (rename(tmp, dst) == 0) {
            renamed = 1;
        } else {
            fprintf(stderr, "filestore: rename to %s: %s\n", dst, strerror(errno));
            ex = EXIT_ERROR;
        }
    }
    if (renamed && fsync(dirfd) != 0) {
        /* The rename happened but may not survive a power loss: commit
         * anyway (the file does carry this token) and report it. */
        fprintf(stderr, "filestore: fsync %s: %s\n", dir, strerror(errno));
        ex = EXIT_ERROR;
    }

    /* 5. Record the token, or nothing. */
    if (!renamed) {
        fence_gate_abort(txn);
        unlink(tmp);
    } else {
        rc = fence_gate_commit(txn);
        if (rc != FENCE_OK) {
            fprintf(stderr, "filestore: %s was written but its token was not recorded: %s\n",
                    key, fence_gate_errmsg(g));
            ex = EXIT_ERROR;
        }
    }
    fence_gate_close(g);
    return ex;
}

static int get(const char *dir, int dirfd, const char *key)
{
    uint64_t token = 0;
    char holder[HOLDER_LEN + 1];
    int fd = open_stored(dirfd, key, &token, holder);
    if (fd < 0) {
        int notfound = errno == ENOENT;
        fprintf(stderr, "filestore: %s/%s: %s\n", dir, key,
                notfound ? "no such key" : "not a filestore file");
        return notfound ? EXIT_NOTFOUND : EXIT_ERROR;
    }
    int rc = copy_fd(fd, STDOUT_FILENO);
    close(fd);
    if (rc != 0) {
        fprintf(stderr, "filestore: reading %s/%s: %s\n", dir, key, strerror(errno));
        return EXIT_ERROR;
    }
    return EXIT_DONE;
}

static int mark(const char *dir, const char *key)
{
    fence_gate *g = NULL;
    int rc = open_gate(dir, &g);
    uint64_t m = 0;
    if (rc == FENCE_OK) {
        rc = fence_gate_mark(g, key, &m);
        if (rc != FENCE_OK) {
            fprintf(stderr, "filestore: %s\n", fence_gate_errmsg(g));
        }
    }
    fence_gate_close(g);
    if (rc == FENCE_OK) {
        printf("%llu\n", (unsigned long long)m);
    }
    return status_exit(rc);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        usage();
        return EXIT_USAGE;
    }
    const char *dir = argv[1], *cmd = argv[2], *key = argv[3];
    if (!valid_key(key)) {
        fprintf(stderr, "filestore: bad key \"%s\"\n", key);
        usage();
        return EXIT_USAGE;
    }
    int is_put = strcmp(cmd, "put") == 0;
    if (is_put ? argc != 5 && argc != 6 : argc != 4) {
        usage();
        return EXIT_USAGE;
    }
    /* The holder: the argument, else $FENCE_HOLDER; "" is none. */
    const char *holder = is_put && argc == 6 ? argv[5] : getenv("FENCE_HOLDER");
    if (holder != NULL && holder[0] == '\0') {
        holder = NULL;
    }
    if (is_put && holder != NULL && !valid_holder(holder, strlen(holder))) {
        fprintf(stderr, "filestore: HOLDER \"%.40s%s\" is not a holder id (%d lowercase hex "
                        "digits); refusing to write\n", holder, strlen(holder) > 40 ? "..." : "",
                HOLDER_LEN);
        return EXIT_USAGE;
    }
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        fprintf(stderr, "filestore: %s: %s\n", dir, strerror(errno));
        return EXIT_ERROR;
    }
    int ex;
    if (is_put) {
        uint64_t token = 0;
        if (parse_token(argv[4], strlen(argv[4]), &token) != 0) {
            fprintf(stderr, "filestore: TOKEN \"%.40s\" is not a fencing token (digits only, "
                            "no sign, spaces or leading zero, 1..%lld); refusing to write\n",
                    argv[4], (long long)INT64_MAX);
            ex = EXIT_NOTOKEN;
        } else {
            ex = put(dir, dirfd, key, token, holder);
        }
    } else if (strcmp(cmd, "get") == 0) {
        ex = get(dir, dirfd, key);
    } else if (strcmp(cmd, "mark") == 0) {
        ex = mark(dir, key);
    } else {
        usage();
        ex = EXIT_USAGE;
    }
    close(dirfd);
    return ex;
}
