/*
 * ph_gate.c -- paused_holder's account as a plain file (account.txt),
 * fenced with the generic write gate (libfence_gate, a persistent gate in
 * account.gate that every process opens for itself).  The fenced write is
 * begin -> write the file -> commit; without fencing it is the bare write.
 */
#include "ph_store_impl.h"

#include "fence_gate.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PH_GATE_RESOURCE "account"

struct ph_gate {
    char data[600];
    fence_gate *gate; /* NULL when not fenced */
};

static void paths(const ph_config *cfg, char *data, size_t dlen, char *gate, size_t glen)
{
    snprintf(data, dlen, "%s/account.txt", cfg->dir);
    snprintf(gate, glen, "%s/account.gate", cfg->dir);
}

/* Replace the file whole (write a temp file, fsync, rename). */
static int put_file(const char *path, long long balance, const char *writer, uint64_t token,
                    char *err, size_t errlen)
{
    char tmp[640], line[128];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int n = snprintf(line, sizeof line, "balance=%lld writer=%s token=%" PRIu64 "\n", balance,
                     writer, token);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "open %s: %s", tmp, strerror(errno));
        return FENCE_ESYS;
    }
    if (write(fd, line, (size_t)n) != n || fsync(fd) != 0) {
        snprintf(err, errlen, "write %s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        return FENCE_ESYS;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "rename %s: %s", tmp, strerror(errno));
        unlink(tmp);
        return FENCE_ESYS;
    }
    return FENCE_OK;
}

static int open_gate(const char *path, fence_gate **out, char *err, size_t errlen)
{
    fence_gate_options go;
    fence_gate_options_init(&go);
    go.path = path;
    go.wait_ms = 5000;
    int rc = fence_gate_open(out, &go);
    if (rc != FENCE_OK) {
        snprintf(err, errlen, "fence_gate_open %s: %s: %s", path, fence_strerror(rc),
                 *out != NULL ? fence_gate_errmsg(*out) : "out of memory");
        fence_gate_close(*out);
        *out = NULL;
    }
    return rc;
}

static int gt_setup(const ph_config *cfg, int fenced, char *err, size_t errlen)
{
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
    char data[600], gate[600], p[640];
    paths(cfg, data, sizeof data, gate, sizeof gate);
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(p, sizeof p, "%s%s", gate, suffixes[i]);
        unlink(p);
    }
    int rc = put_file(data, 100, "setup", 0, err, errlen);
    if (rc == FENCE_OK && fenced) {
        fence_gate *g = NULL;
        rc = open_gate(gate, &g, err, errlen); /* creates the gate file */
        fence_gate_close(g);
    }
    return rc;
}

static int gt_open(const ph_config *cfg, int fenced, void **out, char *err, size_t errlen)
{
    struct ph_gate *s = calloc(1, sizeof *s);
    char gate[600];
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return FENCE_ENOMEM;
    }
    paths(cfg, s->data, sizeof s->data, gate, sizeof gate);
    if (fenced) {
        int rc = open_gate(gate, &s->gate, err, errlen);
        if (rc != FENCE_OK) {
            free(s);
            return rc;
        }
    }
    *out = s;
    return FENCE_OK;
}

static int gt_read(void *impl, ph_row *row, char *err, size_t errlen)
{
    struct ph_gate *s = impl;
    FILE *f = fopen(s->data, "re");
    if (f == NULL) {
        snprintf(err, errlen, "open %s: %s", s->data, strerror(errno));
        return FENCE_ESYS;
    }
    char writer[16] = "";
    int n = fscanf(f, "balance=%lld writer=%15s token=%" SCNu64, &row->balance, writer, &row->token);
    fclose(f);
    if (n != 3) {
        snprintf(err, errlen, "%s: malformed account line", s->data);
        return FENCE_EPROTO;
    }
    snprintf(row->writer, sizeof row->writer, "%s", writer);
    return FENCE_OK;
}

static int gt_write(void *impl, long long balance, const char *writer, uint64_t token,
                    const char *holder, ph_outcome *out)
{
    struct ph_gate *s = impl;
    if (s->gate == NULL) { /* not fenced: the bare write */
        out->status = put_file(s->data, balance, writer, token, out->message, sizeof out->message);
        return out->status;
    }
    fence_gate_txn *t = NULL;
    fence_stale stale;
    int rc = fence_gate_begin(s->gate, PH_GATE_RESOURCE, token, holder, &t, &stale);
    if (rc != FENCE_OK) {
        out->status = rc;
        if (rc == FENCE_STALE) {
            out->offered = stale.offered;
            out->highest = stale.highest;
        }
        snprintf(out->message, sizeof out->message, "fence_gate_begin: %s%s%s", fence_strerror(rc),
                 *fence_gate_errmsg(s->gate) ? ": " : "", fence_gate_errmsg(s->gate));
        return rc;
    }
    rc = put_file(s->data, balance, writer, token, out->message, sizeof out->message);
    if (rc != FENCE_OK) {
        fence_gate_abort(t);
        out->status = rc;
        return rc;
    }
    rc = fence_gate_commit(t);
    if (rc != FENCE_OK)
        snprintf(out->message, sizeof out->message, "fence_gate_commit: %s",
                 fence_gate_errmsg(s->gate));
    out->status = rc;
    return rc;
}

static void gt_close(void *impl)
{
    struct ph_gate *s = impl;
    if (s == NULL)
        return;
    fence_gate_close(s->gate);
    free(s);
}

static void gt_teardown(const ph_config *cfg)
{
    (void)cfg; /* the files go with the temp dir */
}

const ph_ops ph__gate_ops = {gt_setup, gt_open, gt_read, gt_write, gt_close, gt_teardown};
