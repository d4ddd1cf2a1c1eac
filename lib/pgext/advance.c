/* advance.c -- fence.c_advance(resource text, token bigint): fence.sql's
 * fence.advance() in C (extension version 1.1).
 *
 * The same rules, messages, SQLSTATEs, DETAIL and HINT lines as
 * fence.advance (sql/postgres/fence.sql):
 *   22023  the name is NULL or not 1..512 bytes
 *   23Q02  the token is NULL (reason=missing) or <= 0 (reason=malformed);
 *          fence.holder is not '' or 32 lowercase hex digits
 *          (reason=malformed setting=fence.holder)
 *   23Q01  the mark is higher (reason=older), or equal but recorded for a
 *          different holder (reason=repeat, with the HINT)
 * A higher token raises the mark (token, holder, updated_at = now()); a new
 * resource is inserted with ON CONFLICT DO UPDATE (a concurrent creator is
 * waited for, its row then locked); the mark's row stays locked until the
 * transaction ends, as SELECT ... FOR UPDATE locks it.  fence.marks's own
 * triggers (never lowered, never deleted) apply to every write.
 *
 * A non-empty fence.holder counts only when fence.use_token() gave it to
 * this transaction (23Q02 reason=unbound setting=fence.holder otherwise),
 * as in fence.advance().
 *
 * Not SECURITY DEFINER (a definer's call costs a configuration and user
 * switch through fmgr_security_definer and prevents inlining/caching of
 * the PL/pgSQL state): it admits exactly the callers that may EXECUTE
 * fence.advance(text, bigint) (so fence.grant() restricts both), then runs
 * its statements -- prepared once per backend, every name
 * schema-qualified -- as the owner of fence.marks, the way PostgreSQL's
 * referential-integrity triggers do (SetUserIdAndSecContext with
 * SECURITY_LOCAL_USERID_CHANGE), restoring the caller's identity on every
 * exit.  An application role still cannot write fence.marks itself. */
#include "fence_ext.h"

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type_d.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(fence_c_advance);

#define RESOURCE_MAX 512
#define HOLDER_LEN 32

/* The statements, prepared once per backend (SPI_keepplan; the plan
 * cache re-plans them when fence.marks changes). */
static SPIPlanPtr plan_lock;   /* the mark, locked */
static SPIPlanPtr plan_insert; /* a new resource */
static SPIPlanPtr plan_reread; /* after ON CONFLICT found a higher or equal mark */
static SPIPlanPtr plan_raise;  /* a higher token */

static const char SQL_LOCK[] =
    "SELECT m.token, m.holder FROM fence.marks m"
    " WHERE m.resource OPERATOR(pg_catalog.=) $1 FOR UPDATE";
static const char SQL_INSERT[] =
    "INSERT INTO fence.marks AS m (resource, token, holder) VALUES ($1, $2, $3)"
    " ON CONFLICT (resource) DO UPDATE"
    " SET token = EXCLUDED.token, holder = EXCLUDED.holder, updated_at = pg_catalog.now()"
    " WHERE m.token OPERATOR(pg_catalog.<) EXCLUDED.token";
static const char SQL_REREAD[] =
    "SELECT m.token, m.holder FROM fence.marks m WHERE m.resource OPERATOR(pg_catalog.=) $1";
static const char SQL_RAISE[] =
    "UPDATE fence.marks m SET token = $2, holder = $3, updated_at = pg_catalog.now()"
    " WHERE m.resource OPERATOR(pg_catalog.=) $1";

/* Catalog facts kept per backend, forgotten on any invalidation of
 * pg_class / pg_proc entries (ALTER TABLE ... OWNER, DROP, re-install). */
static bool callbacks_registered;
static Oid marks_relid = InvalidOid;
static Oid marks_owner = InvalidOid;
static Oid advance_fn = InvalidOid;
/* What one call uses: copies of the facts above, which an invalidation
 * processed in the middle of the call (any lock taken, any catalog cache
 * miss may process them) can reset but not take from the call. */
typedef struct catalog {
    Oid advance_fn;
    Oid marks_relid;
    Oid marks_owner;
} catalog;

static void forget_rel(Datum arg, Oid relid)
{
    (void)arg;
    if (relid == InvalidOid || relid == marks_relid) {
        marks_relid = InvalidOid;
        marks_owner = InvalidOid;
    }
}

static void forget_proc(Datum arg, int cacheid, uint32 hashvalue)
{
    (void)arg;
    (void)cacheid;
    (void)hashvalue;
    advance_fn = InvalidOid;
}

static pg_attribute_noreturn() void not_installed(const char *what)
{
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("fence: %s does not exist: fence.c_advance() needs "
                           "sql/postgres/fence.sql (version 5 or later) in this database",
                           what)));
}

/* fence.advance(text, bigint)'s OID and fence.marks's OID and owner,
 * into *c (and the cache). */
static void lookup_catalog(catalog *c)
{
    if (!callbacks_registered) {
        CacheRegisterRelcacheCallback(forget_rel, (Datum)0);
        CacheRegisterSyscacheCallback(PROCOID, forget_proc, (Datum)0);
        callbacks_registered = true;
    }
    c->advance_fn = advance_fn;
    c->marks_relid = marks_relid;
    c->marks_owner = marks_owner;
    if (c->advance_fn == InvalidOid) {
        Oid args[2] = {TEXTOID, INT8OID};
        Oid f = LookupFuncName(list_make2(makeString("fence"), makeString("advance")), 2, args,
                               true);
        if (f == InvalidOid) {
            not_installed("fence.advance(text, bigint)");
        }
        advance_fn = c->advance_fn = f;
    }
    if (c->marks_relid == InvalidOid) {
        Oid nsp = get_namespace_oid("fence", true);
        Oid rel = nsp == InvalidOid ? InvalidOid : get_relname_relid("marks", nsp);
        HeapTuple tup;
        if (rel == InvalidOid) {
            not_installed("fence.marks");
        }
        tup = SearchSysCache1(RELOID, ObjectIdGetDatum(rel));
        if (!HeapTupleIsValid(tup)) {
            not_installed("fence.marks");
        }
        marks_owner = c->marks_owner = ((Form_pg_class)GETSTRUCT(tup))->relowner;
        ReleaseSysCache(tup);
        marks_relid = c->marks_relid = rel;
    }
}

static SPIPlanPtr prepare(SPIPlanPtr *slot, const char *sql, int nargs)
{
    static Oid types[3] = {TEXTOID, INT8OID, TEXTOID};
    if (*slot == NULL) {
        SPIPlanPtr p = SPI_prepare(sql, nargs, types);
        if (p == NULL) {
            elog(ERROR, "fence: c_advance: SPI_prepare failed: %s",
                 SPI_result_code_string(SPI_result));
        }
        if (SPI_keepplan(p) != 0) {
            elog(ERROR, "fence: c_advance: SPI_keepplan failed");
        }
        *slot = p;
    }
    return *slot;
}

/* What the statements found. */
typedef struct mark {
    bool found;   /* a mark was read */
    bool written; /* the INSERT (or its DO UPDATE) wrote the mark */
    int64 token;
    char *holder; /* NULL: none; in the caller's memory context */
} mark;

/* The mark read by a SELECT just run (at most one row: resource is the
 * key). */
static void read_mark(mark *m, MemoryContext cxt)
{
    bool isnull;
    Datum d;
    m->found = SPI_processed > 0;
    if (!m->found) {
        return;
    }
    d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
    m->token = isnull ? 0 : DatumGetInt64(d);
    d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
    m->holder = isnull ? NULL : MemoryContextStrdup(cxt, TextDatumGetCString(d));
}

static void run(SPIPlanPtr plan, Datum *values, const char *nulls, int expect)
{
    int rc = SPI_execute_plan(plan, values, nulls, false, 0);
    if (rc != expect) {
        elog(ERROR, "fence: c_advance: unexpected SPI result %s", SPI_result_code_string(rc));
    }
}

/* The statements, as the owner of fence.marks: lock and read the mark;
 * insert it when missing (re-reading it when ON CONFLICT found one that is
 * not lower); raise it when lower.  Errors of the
 * statements themselves (fence.marks's triggers, serialization failures,
 * lock timeouts) propagate with the caller's identity restored. */
static void advance_as_owner(const catalog *c, text *resource, int64 token, Datum writer,
                             bool has_writer, mark *m)
{
    MemoryContext cxt = CurrentMemoryContext;
    Oid save_user;
    int save_sec;
    Datum values[3];
    char nulls[3] = {' ', ' ', has_writer ? ' ' : 'n'};

    values[0] = PointerGetDatum(resource);
    values[1] = Int64GetDatum(token);
    values[2] = writer;

    GetUserIdAndSecContext(&save_user, &save_sec);
    if (SPI_connect() != SPI_OK_CONNECT) {
        elog(ERROR, "fence: c_advance: SPI_connect failed");
    }
    SetUserIdAndSecContext(c->marks_owner, save_sec | SECURITY_LOCAL_USERID_CHANGE);
    PG_TRY();
    {
        run(prepare(&plan_lock, SQL_LOCK, 1), values, nulls, SPI_OK_SELECT);
        read_mark(m, cxt);
        if (!m->found) {
            run(prepare(&plan_insert, SQL_INSERT, 3), values, nulls, SPI_OK_INSERT);
            m->written = SPI_processed > 0;
            if (!m->written) {
                run(prepare(&plan_reread, SQL_REREAD, 1), values, nulls, SPI_OK_SELECT);
                read_mark(m, cxt);
                if (!m->found) {
                    elog(ERROR, "fence: c_advance: the mark of the resource vanished");
                }
            }
        } else if (m->token < token) {
            run(prepare(&plan_raise, SQL_RAISE, 3), values, nulls, SPI_OK_UPDATE);
            if (SPI_processed != 1) {
                elog(ERROR, "fence: c_advance: the mark of the resource vanished");
            }
            m->written = true;
        }
    }
    PG_FINALLY();
    {
        SetUserIdAndSecContext(save_user, save_sec);
    }
    PG_END_TRY();
    SPI_finish();
}

static bool holder_ok(const char *h)
{
    size_t n = strlen(h);
    if (n != HOLDER_LEN) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f'))) {
            return false;
        }
    }
    return true;
}

/* 23Q01 for a mark that is higher (older) or equal for another holder
 * (repeat), fence.advance's words. */
static pg_attribute_noreturn() void stale(const char *name, int64 token, const mark *m)
{
    const char *qname = quote_identifier(name);
    const char *h = m->holder != NULL ? psprintf(" holder=%s", m->holder) : "";
    if (m->token > token) {
        ereport(ERROR,
                (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '1')),
                 errmsg("fence: stale token " INT64_FORMAT " for resource %s (highest seen "
                        INT64_FORMAT ")", token, qname, m->token),
                 errdetail_internal("offered=" INT64_FORMAT " highest=" INT64_FORMAT
                                    " kind=resource object=%s reason=older%s",
                                    token, m->token, name, h)));
    }
    ereport(ERROR,
            (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '1')),
             errmsg("fence: stale token " INT64_FORMAT " for resource %s (highest seen "
                    INT64_FORMAT ", recorded for a different holder)", token, qname, m->token),
             errdetail_internal("offered=" INT64_FORMAT " highest=" INT64_FORMAT
                                " kind=resource object=%s reason=repeat%s",
                                token, m->token, name, h),
             errhint("The token was issued twice (e.g. after a Redis failover); only the "
                     "holder it was recorded for may repeat it.  Acquire the lease again for "
                     "a higher token.")));
}

/* The writer's holder for resource `name`: NULL for none.  Unset or '' is
 * none; anything but 32 lowercase hex digits fails closed; a holder set for
 * the session is refused, as the C guard refuses it. */
static char *writer_holder(const char *name)
{
    const char *raw = fence_ext_setting("fence.holder");
    if (raw == NULL) {
        return NULL;
    }
    if (!holder_ok(raw)) {
        int clip = pg_mbcharcliplen(raw, (int)strlen(raw), 40); /* left(raw, 40) */
        ereport(ERROR,
                (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '2')),
                 errmsg("fence: malformed holder %s in fence.holder for resource %s",
                        quote_literal_cstr(pnstrdup(raw, clip)), quote_identifier(name)),
                 errdetail_internal("reason=malformed setting=fence.holder"),
                 errhint("fence.holder must be the lease's holder id, 32 lowercase hex "
                         "digits, or empty for none.")));
    }
    if (!fence_ext_bound()) {
        ereport(ERROR,
                (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '2')),
                 errmsg("fence: holder for resource %s was not set by fence.use_token() in "
                        "this transaction",
                        quote_identifier(name)),
                 errdetail_internal("reason=unbound setting=fence.holder"),
                 errhint("Set it in the writing transaction with SELECT fence.use_token(<token>, "
                         "<holder>): a value left by SET, ALTER ROLE/DATABASE ... SET or an "
                         "earlier transaction of the connection is never admitted.")));
    }
    return pstrdup(raw);
}

/* fence.c_advance(resource text, token bigint) RETURNS bigint. */
Datum fence_c_advance(PG_FUNCTION_ARGS)
{
    text *res;
    char *name;
    int64 token;
    char *writer;
    AclResult acl;
    catalog cat;
    mark m = {0};

    /* Who may call fence.advance may call this (fence.grant() restricts
     * both); the same error as calling fence.advance without EXECUTE. */
    lookup_catalog(&cat);
    acl = pg_proc_aclcheck(cat.advance_fn, GetUserId(), ACL_EXECUTE);
    if (acl != ACLCHECK_OK) {
        aclcheck_error(acl, OBJECT_FUNCTION, "advance");
    }

    if (PG_ARGISNULL(0)) {
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("fence: resource name must be 1..512 bytes, got NULL")));
    }
    res = PG_GETARG_TEXT_PP(0);
    if (VARSIZE_ANY_EXHDR(res) < 1 || VARSIZE_ANY_EXHDR(res) > RESOURCE_MAX) {
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("fence: resource name must be 1..512 bytes, got %d bytes",
                               (int)VARSIZE_ANY_EXHDR(res))));
    }
    name = text_to_cstring(res);
    if (PG_ARGISNULL(1) || PG_GETARG_INT64(1) <= 0) {
        bool missing = PG_ARGISNULL(1);
        ereport(ERROR,
                (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '2')),
                 errmsg("fence: no valid fencing token for resource %s: %s (tokens are "
                        "1..9223372036854775807)",
                        quote_identifier(name),
                        missing ? "NULL" : psprintf(INT64_FORMAT, PG_GETARG_INT64(1))),
                 errdetail_internal(missing ? "reason=missing" : "reason=malformed")));
    }
    token = PG_GETARG_INT64(1);

    writer = writer_holder(name);

    advance_as_owner(&cat, res, token,
                     writer != NULL ? CStringGetTextDatum(writer) : (Datum)0, writer != NULL,
                     &m);
    if (m.written) {
        PG_RETURN_INT64(token);
    }
    if (m.token == token &&
        strcmp(m.holder != NULL ? m.holder : "", writer != NULL ? writer : "") == 0) {
        PG_RETURN_INT64(token);
    }
    stale(name, token, &m);
}

/* The same function under the symbol extension 1.4's catalog names
 * (fence--1.4.sql and every update to 1.4): a backend still running an
 * older fence.so, loaded before the package was upgraded, has no such
 * symbol, so its writes fail (42883) instead of applying the older rule.
 * The old symbol stays for a catalog not yet updated (the new rule under
 * either name). */
PG_FUNCTION_INFO_V1(fence_c_advance_v2);

Datum fence_c_advance_v2(PG_FUNCTION_ARGS)
{
    return fence_c_advance(fcinfo);
}
