/* fence_ext.h -- what the files of the PostgreSQL extension "fence" share.
 *
 * The extension is an accelerator for fence.sql (sql/postgres/, version 5 or
 * later): C versions of the per-row trigger functions, living in the same
 * schema and raising exactly the errors fence.sql's PL/pgSQL versions
 * raise (SQLSTATE, message, DETAIL, HINT, SCHEMA/TABLE/COLUMN fields), so
 * that libfence_pg and the tests cannot tell them apart.
 *   fence.c  the module, fence.c_version(), the per-trigger cache, the
 *            writer's token and the shared error reports
 *   guard.c  fence.c_guard(): BEFORE ROW INSERT/UPDATE/DELETE
 *   check.c  fence.c_check(): AFTER ROW INSERT/UPDATE
 *   use_token.c  fence.c_use_token(): fence.sql's fence.use_token() in C (1.5)
 * (1.1 to 1.3 also had fence.c_advance, fence.advance() in C: 1.4 dropped
 * it -- it cost as much as the PL/pgSQL fence.advance and needed catalog
 * lookups beyond the interfaces below; docs/postgres-extension.md.)
 * Only documented extension interfaces: fmgr, commands/trigger.h, SPI with
 * saved plans, the GUC functions (GetConfigOption); no hooks, nothing of
 * PostgreSQL's internal tables.  No version-dependent code.
 * Memory: everything is palloc'd in the memory context current at the
 * call (the trigger's per-tuple context) unless said otherwise. */
#ifndef FENCE_EXT_H
#define FENCE_EXT_H

#include "postgres.h"

/* lib/common: the token grammar (fence__token_parse) and the store rule
 * (fence__stamp_rule), compiled into the module. */
#include "common.h"

#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/rel.h"

/* The interface revision of this module, fence.c_version(). */
#define FENCE_EXT_VERSION 2

/* What a fence trigger knows about itself, computed once per executor run
 * of the statement (kept in flinfo->fn_extra, fn_mcxt). */
typedef struct fence_ext_trig {
    Oid tgoid;          /* the trigger this was computed for */
    AttrNumber attnum;  /* the token column */
    bool permissive;    /* TG_ARGV[1] = 'permissive' */
    /* A BEFORE ROW trigger that fires after this one for INSERT / UPDATE
     * while the table has no zz_fence_check_ins / _upd: its name (NULL:
     * none).  Only the guard looks. */
    const char *unchecked_ins;
    const char *unchecked_upd;
} fence_ext_trig;

/* The cache of the trigger being fired (computing it on first use):
 * checks the trigger protocol (`fn` names the function in errors, `after`
 * the timing it must fire at), its two arguments and the column (bigint).
 * Raises 39P01 / 22023 / 42703 when the trigger is misdeclared. */
const fence_ext_trig *fence_ext_trig_of(FunctionCallInfo fcinfo, const char *fn, bool after);

/* The operation of a row trigger: "INSERT", "UPDATE" or "DELETE". */
const char *fence_ext_op(const TriggerData *td);

/* Where a row check runs, for its error reports: the table (rel, or when
 * rel is NULL the table of OID relid, opened only to report an error), the
 * token column, the operation ("INSERT", "UPDATE", "DELETE"). */
typedef struct fence_ext_site {
    Relation rel;
    Oid relid;
    AttrNumber attnum;
    const char *op;
} fence_ext_site;

/* The writer's token, read from fence.token: true with *tok set, or false
 * when there is none (unset or '').  The grammar is lib/common's
 * (fence__token_parse: 1..9223372036854775807 in canonical decimal, as
 * fence.sql's).  Raises 23Q02 for a malformed token
 * (with the guard's HINT when `hint`), and, when `bound`, for a token that
 * fence.use_token() did not give to this transaction (reason=unbound). */
bool fence_ext_token(const TriggerData *td, const fence_ext_trig *t, bool hint, bool bound,
                     int64 *tok);

/* The same, reporting errors at site s. */
bool fence_ext_token_at(const fence_ext_site *s, bool hint, bool bound, int64 *tok);

/* The table's name as fence.sql writes it in messages:
 * quote_ident(schema) || '.' || quote_ident(table). */
char *fence_ext_object(Relation rel);

/* 23Q02 reason=missing for op on the table; `cleared` adds the check's
 * " (fence.token was cleared during the statement)" and drops the HINT. */
void fence_ext_no_token(const TriggerData *td, const fence_ext_trig *t,
                                                bool cleared);

void fence_ext_no_token_at(const fence_ext_site *s, bool cleared);

/* 23Q01 reason=older: token tok is lower than the row's stamp seen. */
void fence_ext_stale(const fence_ext_site *s, int64 tok, int64 seen);

/* Whether a trigger whose pg_trigger.tgenabled is `enabled` fires under
 * the session's session_replication_role (trigger.c's TriggerEnabled). */
bool fence_ext_fires(char enabled);

/* The token column's value in tuple (0 for NULL, as fence.sql reads it). */
int64 fence_ext_stamp(const TriggerData *td, const fence_ext_trig *t, HeapTuple tuple,
                      bool *isnull);

#endif
