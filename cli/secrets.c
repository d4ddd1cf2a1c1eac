/*
 * secrets.c -- the server's credentials kept out of sight.
 *
 * - A URL given on the command line with a password: fence copies it, then
 *   overwrites the password's bytes in its own argv (what /proc/PID/cmdline
 *   and ps show) and warns once.  It was visible until then.
 * - $FENCE_REDIS_PASSWORD, $FENCE_REDIS_SENTINEL_PASSWORD and the password
 *   in $FENCE_URL or $FENCE_REDIS_URL: copied at start, their bytes
 *   overwritten in the environment block (/proc/PID/environ), the password
 *   variables unset and the URL variables replaced by the URL without
 *   credentials, so the command fence runs inherits none of them.
 * - --password-file / --sentinel-password-file: read here; only a regular
 *   file (a FIFO without a writer would block fence forever).
 * Copies are wiped when fence exits (cli__secrets_free).
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECRET_FILE_MAX 4096 /* bytes in a password file */

static char *env_url;       /* $FENCE_URL as fence found it (may hold a password) */
static char *env_redis_url; /* $FENCE_REDIS_URL likewise */
static char *env_password; /* $FENCE_REDIS_PASSWORD */
static char *env_sentinel_password;
static char **kept;        /* copies made for argv URLs and password files */
static size_t nkept, capkept;
static int warned;

static void wipe(char *s, size_t n)
{
    volatile char *p = s;
    for (size_t i = 0; i < n; i++) {
        p[i] = 'x';
    }
}

static void wipe_free(char *s)
{
    if (s != NULL) {
        volatile char *p = s;
        for (size_t i = 0; s[i] != '\0'; i++) {
            p[i] = '\0';
        }
        free(s);
    }
}

/* Keep s (malloc'ed) until cli__secrets_free; NULL (s freed) when out of memory. */
static char *keep(char *s)
{
    if (s == NULL) {
        return NULL;
    }
    if (nkept == capkept) {
        size_t cap = capkept ? 2 * capkept : 4;
        char **v = realloc(kept, cap * sizeof *v);
        if (v == NULL) {
            wipe_free(s);
            return NULL;
        }
        kept = v;
        capkept = cap;
    }
    kept[nkept++] = s;
    return s;
}

/* Where the userinfo ("user:password" or "password") of a URL is: *start
 * and *len (the bytes before the '@'), and the password's part of it.
 * 0 when url has none.  The authority ends at the first '/', '?' or '#'
 * after "://", as lib/lease/redis/url.c reads it; the last '@' in it ends the
 * userinfo. */
static int userinfo(const char *url, size_t *start, size_t *len, size_t *pw_start)
{
    const char *sep = url != NULL ? strstr(url, "://") : NULL;
    if (sep == NULL) {
        return 0;
    }
    const char *p = sep + 3;
    const char *end = p + strcspn(p, "/?#");
    const char *at = NULL;
    for (const char *s = p; s < end; s++) {
        if (*s == '@') {
            at = s;
        }
    }
    if (at == NULL) {
        return 0;
    }
    *start = (size_t)(p - url);
    *len = (size_t)(at - p);
    const char *colon = memchr(p, ':', *len);
    /* "user:password@" or ":password@"; a lone "password@" (Sentinel URLs)
     * is all password. */
    *pw_start = colon != NULL ? (size_t)(colon + 1 - url) : *start;
    if (colon == NULL && (strncmp(url, "postgres", 8) == 0 || strncmp(url, "etcd", 4) == 0)) {
        *pw_start = *start + *len; /* a PostgreSQL or etcd URL's lone "user@" is a user name */
    }
    return 1;
}

int cli__url_has_password(const char *url)
{
    size_t s, n, pw;
    return userinfo(url, &s, &n, &pw) && s + n > pw;
}

char *cli__url_strip(const char *url)
{
    size_t s, n, pw;
    if (!userinfo(url, &s, &n, &pw)) {
        return strdup(url);
    }
    size_t total = strlen(url);
    char *out = malloc(total + 1);
    if (out != NULL) {
        memcpy(out, url, s);
        memcpy(out + s, url + s + n + 1, total - (s + n + 1) + 1); /* after the '@' */
    }
    return out;
}

/* Overwrite the password's bytes in url (in place). */
static void blank_password(char *url)
{
    size_t s, n, pw;
    if (userinfo(url, &s, &n, &pw) && s + n > pw) {
        wipe(url + pw, s + n - pw);
    }
}

const char *cli__url_from_argv(char *val)
{
    if (!cli__url_has_password(val)) {
        return val;
    }
    char *copy = keep(strdup(val));
    if (copy == NULL) {
        return val; /* out of memory: the open fails later anyway */
    }
    blank_password(val);
    if (!warned) {
        warned = 1;
        fputs("fence: warning: a password in the --url / --redis URL can be seen by other users in the "
              "process list until fence blanks it (and stays in shell history); use "
              "FENCE_REDIS_PASSWORD or --password-file FILE\n", stderr);
    }
    return copy;
}

/* The value of environment entry e if its name is `name`, else NULL. */
static char *entry_value(char *e, const char *name)
{
    size_t n = strlen(name);
    return strncmp(e, name, n) == 0 && e[n] == '=' ? e + n + 1 : NULL;
}

/* Overwrite, in every copy of $name in the environment block (a process
 * may be started with the same name twice), the whole value (urls == 0)
 * or only a URL's userinfo (urls == 1). */
static void wipe_every_copy(const char *name, int urls)
{
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        char *v = entry_value(*e, name);
        size_t s, n, pw;
        if (v == NULL) {
            continue;
        }
        if (!urls) {
            wipe(v, strlen(v));
        } else if (userinfo(v, &s, &n, &pw)) {
            wipe(v + s, n);
        }
    }
}

/* Copy $name's (first) value, overwrite every copy in the environment
 * block, unset them all. */
static char *take_env(const char *name)
{
    char *v = getenv(name);
    char *copy = v != NULL && v[0] != '\0' ? strdup(v) : NULL;
    wipe_every_copy(name, 0);
    unsetenv(name); /* removes every copy */
    return copy;
}

/* Copy URL variable $name (NULL when unset or empty), then leave every
 * copy of it in the environment without credentials: one stripped copy is
 * all the command sees. */
static char *take_url_env(const char *name)
{
    char *url = getenv(name);
    if (url == NULL || url[0] == '\0') {
        wipe_every_copy(name, 1);
        return NULL;
    }
    char *copy = strdup(url);
    char *stripped = copy != NULL ? cli__url_strip(copy) : NULL;
    wipe_every_copy(name, 1);
    unsetenv(name);
    if (stripped != NULL) {
        setenv(name, stripped, 1);
        free(stripped);
    }
    return copy;
}

void cli__secrets_init(void)
{
    env_password = take_env("FENCE_REDIS_PASSWORD");
    env_sentinel_password = take_env("FENCE_REDIS_SENTINEL_PASSWORD");
    env_url = take_url_env("FENCE_URL");
    env_redis_url = take_url_env("FENCE_REDIS_URL");
}

void cli__secrets_free(void)
{
    wipe_free(env_url);
    wipe_free(env_redis_url);
    wipe_free(env_password);
    wipe_free(env_sentinel_password);
    env_url = env_redis_url = env_password = env_sentinel_password = NULL;
    for (size_t i = 0; i < nkept; i++) {
        wipe_free(kept[i]);
    }
    free(kept);
    kept = NULL;
    nkept = capkept = 0;
}

const char *cli__env_url(void)
{
    return env_url;
}

const char *cli__env_redis_url(void)
{
    return env_redis_url;
}

const char *cli__env_password(void)
{
    return env_password;
}

const char *cli__env_sentinel_password(void)
{
    return env_sentinel_password;
}

/* Read at most SECRET_FILE_MAX + 3 bytes of fd into buf (one more than a
 * longest password with "\r\n"); the count or -1. */
static ssize_t read_all(int fd, char *buf)
{
    size_t got = 0;
    while (got < SECRET_FILE_MAX + 3) {
        ssize_t r = read(fd, buf + got, SECRET_FILE_MAX + 3 - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            return -1;
        }
        if (r == 0) {
            break;
        }
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* What is wrong with the n bytes of a password file (one trailing newline
 * already cut); NULL when fine. */
static const char *secret_problem(const char *buf, size_t n)
{
    if (n == 0) {
        return "is empty";
    }
    if (n > SECRET_FILE_MAX) {
        return "is longer than 4096 bytes";
    }
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == '\0' || buf[i] == '\n' || buf[i] == '\r') {
            return "holds more than one line (or a NUL byte)";
        }
    }
    return NULL;
}

/* What a file that is not a regular one is, for the message. */
static const char *file_kind(mode_t m)
{
    if (S_ISDIR(m)) {
        return "a directory";
    }
    if (S_ISFIFO(m)) {
        return "a FIFO (named pipe) or pipe";
    }
    if (S_ISCHR(m)) {
        return "a character device";
    }
    if (S_ISBLK(m)) {
        return "a block device";
    }
    if (S_ISSOCK(m)) {
        return "a socket";
    }
    return "a special file";
}

int cli__read_secret(const char *cmd, const char *opt, const char *path, const char **out)
{
    char *buf = malloc(SECRET_FILE_MAX + 4);
    if (buf == NULL) {
        fprintf(stderr, "fence %s: %s: out of memory\n", cmd, opt);
        return CLI_EX_OSERR;
    }
    /* O_NONBLOCK: opening a FIFO with no writer (or a device) must not
     * hang fence; only a regular file is read. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) != 0) {
        int fe = errno;
        close(fd);
        fd = -1;
        errno = fe;
    }
    if (fd >= 0 && !S_ISREG(sb.st_mode)) {
        close(fd);
        free(buf);
        return cli__usage_error(cmd, "%s %s: %s, not a regular file (the password must be "
                                "in a file)", opt, path, file_kind(sb.st_mode));
    }
    ssize_t n = fd >= 0 ? read_all(fd, buf) : -1;
    int e = errno;
    if (fd >= 0) {
        close(fd);
    }
    if (n < 0) {
        wipe(buf, SECRET_FILE_MAX + 4); /* a read may have failed half-way */
        free(buf);
        return cli__usage_error(cmd, "%s %s: %s", opt, path, strerror(e));
    }
    size_t len = (size_t)n;
    if (len > 0 && len < SECRET_FILE_MAX + 3 && buf[len - 1] == '\n') {
        len--;
        if (len > 0 && buf[len - 1] == '\r') {
            len--;
        }
    }
    const char *why = secret_problem(buf, len);
    if (why != NULL) {
        wipe(buf, (size_t)n);
        free(buf);
        return cli__usage_error(cmd, "%s %s: the file %s", opt, path, why);
    }
    wipe(buf + len, (size_t)n - len);
    buf[len] = '\0';
    *out = keep(buf);
    if (*out == NULL) {
        fprintf(stderr, "fence %s: %s: out of memory\n", cmd, opt);
        return CLI_EX_OSERR;
    }
    return CLI_EX_OK;
}

/* The URL to use: --url / --redis, else FENCE_URL, else FENCE_REDIS_URL
 * (their copies taken at start), else the default.  Kept here, beside the
 * environment handling, so that args.c stays pure parsing. */
const char *cli__url(const char *given)
{
    if (given != NULL) {
        return given;
    }
    if (env_url != NULL) {
        return env_url;
    }
    return env_redis_url != NULL ? env_redis_url : CLI_DEFAULT_URL;
}
