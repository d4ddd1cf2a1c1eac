/*
 * ph_store.h -- the stores paused_holder.c races on (internal to the
 * example).  One account row { balance, written_by, token }, kept in
 * SQLite (libfence_sqlite), PostgreSQL (libfence_pg) or a plain file
 * behind the generic write gate (libfence_gate).
 *
 * Each store is used in three places: the parent creates a fresh account
 * (ph_store_setup) and reads the final row (ph_store_read); each child
 * process opens its own connection after fork() (ph_store_open) to read
 * and write.  "fenced" decides whether the store checks tokens:
 *   - not fenced: the table/resource is not protected; a write is a plain
 *     write and the token is only recorded as data;
 *   - fenced: the write carries the token and the store rejects it with
 *     FENCE_STALE when a newer one has been seen.
 *
 * Ownership: a ph_store belongs to the process that opened it and is freed
 * by ph_store_close(); it never survives fork().  Messages go into
 * caller-owned buffers.
 */
#ifndef PH_STORE_H
#define PH_STORE_H

#include <stddef.h>
#include <stdint.h>

enum ph_kind { PH_SQLITE = 0, PH_POSTGRES = 1, PH_GATE = 2 };

/* Where the store lives; filled in by the parent before the first fork. */
typedef struct ph_config {
    int kind;                /* enum ph_kind */
    char dir[512];           /* a private temp dir (sqlite and gate files) */
    const char *pg_conninfo; /* postgres: libpq conninfo ("" = PG* env) */
    char pg_table[64];       /* postgres: the account table (unique per run) */
} ph_config;

/* The account row as the store holds it. */
typedef struct ph_row {
    long long balance;
    char writer[16]; /* "setup", "A" or "B" */
    uint64_t token;  /* the writer's token (the stamp, when fenced) */
} ph_row;

/* What a write came to. */
typedef struct ph_outcome {
    int status;        /* FENCE_OK, FENCE_STALE, or an error code */
    uint64_t offered;  /* FENCE_STALE: the rejected token */
    uint64_t highest;  /* FENCE_STALE: the newest token the store has seen */
    char message[512]; /* on anything but FENCE_OK: why */
} ph_outcome;

typedef struct ph_store ph_store;

/* "sqlite", "postgres", "gate"; NULL for an unknown kind. */
const char *ph_kind_name(int kind);

/* Create a fresh account (balance 100, written by "setup", token 0),
 * protected when `fenced`.  Returns a fence status; err gets the reason. */
int ph_store_setup(const ph_config *cfg, int fenced, char *err, size_t errlen);

/* Open a connection to the account (in the process that will use it). */
int ph_store_open(const ph_config *cfg, int fenced, ph_store **out, char *err,
                  size_t errlen);

/* Read the account row as committed in the store. */
int ph_store_read(ph_store *s, ph_row *row, char *err, size_t errlen);

/* Write the account row: balance and writer, with token and the lease's
 * holder id (NULL: none).  Fenced stores reject a stale token (FENCE_STALE,
 * offered/highest set). */
int ph_store_write(ph_store *s, long long balance, const char *writer, uint64_t token,
                   const char *holder, ph_outcome *out);

void ph_store_close(ph_store *s);

/* Remove what setup created that outlives the temp dir (the PostgreSQL
 * table).  Best effort. */
void ph_store_teardown(const ph_config *cfg);

#endif
