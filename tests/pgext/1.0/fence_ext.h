/* fence_ext.h -- what the files of the PostgreSQL extension "fence" share.
 *
 * The extension is an accelerator for sql/postgres/fence.sql (version 4 or
 * later): C versions of the per-row trigger functions, living in the same
 * schema and raising exactly the errors fence.sql's PL/pgSQL versions
 * raise (SQLSTATE, message, DETAIL, HINT, SCHEMA/TABLE/COLUMN fields), so
 * that libfence_pg and the tests cannot tell them apart.
 *   fence.c  the module, fence.c_version(), the per-trigger cache, the
 *            writer's token and the shared error reports
 *   guard.c  fence.c_guard(): BEFORE ROW INSERT/UPDATE/DELETE
 *   check.c  fence.c_check(): AFTER ROW INSERT/UPDATE
 *   scope.c  whether a setting holds for the transaction or the session
 * Memory: everything is palloc'd in the memory context current at the
 * call (the trigger's per-tuple context) unless said otherwise. */
#ifndef FENCE_EXT_H
#define FENCE_EXT_H

#include "postgres.h"

#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/rel.h"

/* The interface revision of this module, fence.c_version(). */
#define FENCE_EXT_VERSION 1

/* Where a setting's current value comes from (scope.c). */
typedef enum fence_ext_scope {
    FENCE_SCOPE_UNSET,       /* no such setting, or its value is '' */
    FENCE_SCOPE_TRANSACTION, /* SET LOCAL / set_config(.., true) / a function's SET */
    FENCE_SCOPE_SESSION      /* SET, set_config(.., false), ALTER ROLE/DATABASE SET,
                              * postgresql.conf, connection options */
} fence_ext_scope;

/* The current value of setting `name` (lowercase) into *value (NULL when
 * unset or ''; the pointer is the GUC's own and valid until the setting
 * changes) and where it comes from.  Never raises. */
fence_ext_scope fence_ext_setting(const char *name, const char **value);

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

/* The writer's token, read from fence.token: true with *tok set, or false
 * when there is none (unset or '').  Raises 23Q02 for a malformed token
 * (with the guard's HINT when `hint`), and, when `refuse_session`, for a
 * token (or fence.holder) set for the session rather than the
 * transaction. */
bool fence_ext_token(const TriggerData *td, const fence_ext_trig *t, bool hint,
                     bool refuse_session, int64 *tok);

/* The table's name as fence.sql writes it in messages:
 * quote_ident(schema) || '.' || quote_ident(table). */
char *fence_ext_object(Relation rel);

/* 23Q02 reason=missing for op on the table; `cleared` adds the check's
 * " (fence.token was cleared during the statement)" and drops the HINT. */
pg_attribute_noreturn() void fence_ext_no_token(const TriggerData *td, const fence_ext_trig *t,
                                                bool cleared);

/* The token column's value in tuple (0 for NULL, as fence.sql reads it). */
int64 fence_ext_stamp(const TriggerData *td, const fence_ext_trig *t, HeapTuple tuple,
                      bool *isnull);

#endif
