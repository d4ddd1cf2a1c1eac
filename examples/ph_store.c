/*
 * ph_store.c -- paused_holder's store interface: dispatch on the kind.
 */
#include "ph_store_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ph_store {
    const ph_ops *ops;
    void *impl;
};

static const ph_ops *ops_of(int kind)
{
    switch (kind) {
    case PH_SQLITE: return &ph__sqlite_ops;
    case PH_POSTGRES: return &ph__pg_ops;
    case PH_GATE: return &ph__gate_ops;
    default: return NULL;
    }
}

const char *ph_kind_name(int kind)
{
    switch (kind) {
    case PH_SQLITE: return "sqlite";
    case PH_POSTGRES: return "postgres";
    case PH_GATE: return "gate";
    default: return NULL;
    }
}

int ph_store_setup(const ph_config *cfg, int fenced, char *err, size_t errlen)
{
    const ph_ops *ops = ops_of(cfg->kind);
    if (ops == NULL) {
        snprintf(err, errlen, "unknown store kind %d", cfg->kind);
        return FENCE_EINVAL;
    }
    return ops->setup(cfg, fenced, err, errlen);
}

int ph_store_open(const ph_config *cfg, int fenced, ph_store **out, char *err, size_t errlen)
{
    const ph_ops *ops = ops_of(cfg->kind);
    *out = NULL;
    if (ops == NULL) {
        snprintf(err, errlen, "unknown store kind %d", cfg->kind);
        return FENCE_EINVAL;
    }
    ph_store *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return FENCE_ENOMEM;
    }
    s->ops = ops;
    int rc = ops->open(cfg, fenced, &s->impl, err, errlen);
    if (rc != FENCE_OK) {
        free(s);
        return rc;
    }
    *out = s;
    return FENCE_OK;
}

int ph_store_read(ph_store *s, ph_row *row, char *err, size_t errlen)
{
    memset(row, 0, sizeof *row);
    return s->ops->read(s->impl, row, err, errlen);
}

int ph_store_write(ph_store *s, long long balance, const char *writer, uint64_t token,
                   const char *holder, ph_outcome *out)
{
    memset(out, 0, sizeof *out);
    return s->ops->write(s->impl, balance, writer, token, holder, out);
}

void ph_store_close(ph_store *s)
{
    if (s == NULL)
        return;
    s->ops->close(s->impl);
    free(s);
}

void ph_store_teardown(const ph_config *cfg)
{
    const ph_ops *ops = ops_of(cfg->kind);
    if (ops != NULL)
        ops->teardown(cfg);
}
