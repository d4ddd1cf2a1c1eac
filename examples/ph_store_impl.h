/*
 * ph_store_impl.h -- what each of paused_holder's stores provides
 * (ph_sqlite.c, ph_pg.c, ph_gate.c); ph_store.c dispatches on the kind.
 * Same contracts as the ph_store_* functions of ph_store.h.
 */
#ifndef PH_STORE_IMPL_H
#define PH_STORE_IMPL_H

#include "fence.h"
#include "ph_store.h"

typedef struct ph_ops {
    int (*setup)(const ph_config *cfg, int fenced, char *err, size_t errlen);
    int (*open)(const ph_config *cfg, int fenced, void **out, char *err, size_t errlen);
    int (*read)(void *impl, ph_row *row, char *err, size_t errlen);
    int (*write)(void *impl, long long balance, const char *writer, uint64_t token,
                 const char *holder, ph_outcome *out);
    void (*close)(void *impl);
    void (*teardown)(const ph_config *cfg);
} ph_ops;

extern const ph_ops ph__sqlite_ops;
extern const ph_ops ph__pg_ops;
extern const ph_ops ph__gate_ops;

#endif
