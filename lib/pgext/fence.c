/* fence.c -- the PostgreSQL extension "fence": the module, its version,
 * and what the guard and the check share (the trigger's cache, the
 * writer's token, fence.sql's error reports).  See fence_ext.h. */
#include "fence_ext.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type_d.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/relcache.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(fence_c_version);

/* fence.c_version(): the interface revision of this module. */
Datum fence_c_version(PG_FUNCTION_ARGS)
{
    (void)fcinfo;
    PG_RETURN_INT32(FENCE_EXT_VERSION);
}

const char *fence_ext_op(const TriggerData *td)
{
    if (TRIGGER_FIRED_BY_INSERT(td->tg_event)) {
        return "INSERT";
    }
    if (TRIGGER_FIRED_BY_UPDATE(td->tg_event)) {
        return "UPDATE";
    }
    return "DELETE";
}

char *fence_ext_object(Relation rel)
{
    char *nsp = get_namespace_name(RelationGetNamespace(rel));
    return psprintf("%s.%s", quote_identifier(nsp ? nsp : ""),
                    quote_identifier(RelationGetRelationName(rel)));
}

/* The BEFORE ROW trigger for `event` that fires after `self` (triggers fire
 * in name order, the order of trigdesc) when no enabled zz_fence_check_*
 * AFTER ROW trigger for the same event is there to catch it rewriting the
 * token column: its name, copied into cxt, or NULL.  Disabled triggers
 * never fire and do not count; fence's own guards do not either. */
static const char *unchecked_later(const TriggerDesc *desc, Oid self, int event,
                                   const char *check_name, MemoryContext cxt)
{
    const char *later = NULL;
    bool after_self = false;
    bool checked = false;
    if (desc == NULL) {
        return NULL;
    }
    for (int i = 0; i < desc->numtriggers; i++) {
        const Trigger *tg = &desc->triggers[i];
        if (tg->tgoid == self) {
            after_self = true;
            continue;
        }
        if (tg->tgenabled == TRIGGER_DISABLED || !TRIGGER_FOR_ROW(tg->tgtype) ||
            (tg->tgtype & event) == 0) {
            continue;
        }
        if (TRIGGER_FOR_AFTER(tg->tgtype) && strcmp(tg->tgname, check_name) == 0) {
            checked = true;
        } else if (after_self && later == NULL && TRIGGER_FOR_BEFORE(tg->tgtype) &&
                   strncmp(tg->tgname, "zz_fence_guard_", 15) != 0) {
            later = tg->tgname;
        }
    }
    return later != NULL && !checked ? MemoryContextStrdup(cxt, later) : NULL;
}

const fence_ext_trig *fence_ext_trig_of(FunctionCallInfo fcinfo, const char *fn, bool after)
{
    TriggerData *td;
    const Trigger *tg;
    fence_ext_trig *t;
    TupleDesc desc;
    AttrNumber attnum = InvalidAttrNumber;

    if (!CALLED_AS_TRIGGER(fcinfo)) {
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("fence: %s() must be called as a trigger", fn)));
    }
    td = (TriggerData *)fcinfo->context;
    tg = td->tg_trigger;
    t = (fence_ext_trig *)fcinfo->flinfo->fn_extra;
    if (t != NULL && t->tgoid == tg->tgoid) {
        return t;
    }

    if (!TRIGGER_FIRED_FOR_ROW(td->tg_event) ||
        (after ? !TRIGGER_FIRED_AFTER(td->tg_event) : !TRIGGER_FIRED_BEFORE(td->tg_event)) ||
        TRIGGER_FIRED_BY_TRUNCATE(td->tg_event) ||
        (after && TRIGGER_FIRED_BY_DELETE(td->tg_event))) {
        ereport(ERROR,
                (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                 errmsg("fence: %s() must be fired %s FOR EACH ROW", fn,
                        after ? "AFTER INSERT OR UPDATE" : "BEFORE INSERT, UPDATE OR DELETE")));
    }
    if (tg->tgnargs != 2 ||
        (strcmp(tg->tgargs[1], "strict") != 0 && strcmp(tg->tgargs[1], "permissive") != 0)) {
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("fence: %s() takes two arguments: the token column and "
                               "'strict' or 'permissive'",
                               fn),
                        errtable(td->tg_relation)));
    }
    desc = RelationGetDescr(td->tg_relation);
    for (int i = 0; i < desc->natts; i++) {
        Form_pg_attribute a = TupleDescAttr(desc, i);
        if (!a->attisdropped && strcmp(NameStr(a->attname), tg->tgargs[0]) == 0) {
            attnum = a->attnum;
            break;
        }
    }
    if (attnum == InvalidAttrNumber) {
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
                        errmsg("fence: token column %s of %s does not exist",
                               quote_identifier(tg->tgargs[0]), fence_ext_object(td->tg_relation)),
                        errhint("Run fence.protect() on the table again."),
                        errtable(td->tg_relation)));
    }
    if (TupleDescAttr(desc, attnum - 1)->atttypid != INT8OID) {
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("fence: token column %s of %s is not a bigint",
                               quote_identifier(tg->tgargs[0]), fence_ext_object(td->tg_relation)),
                        errhint("Run fence.protect() on the table again."),
                        errtablecol(td->tg_relation, attnum)));
    }

    t = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof *t);
    t->tgoid = tg->tgoid;
    t->attnum = attnum;
    t->permissive = strcmp(tg->tgargs[1], "permissive") == 0;
    if (!after) {
        const TriggerDesc *all = td->tg_relation->trigdesc;
        t->unchecked_ins = unchecked_later(all, tg->tgoid, TRIGGER_TYPE_INSERT,
                                           "zz_fence_check_ins", fcinfo->flinfo->fn_mcxt);
        t->unchecked_upd = unchecked_later(all, tg->tgoid, TRIGGER_TYPE_UPDATE,
                                           "zz_fence_check_upd", fcinfo->flinfo->fn_mcxt);
    }
    fcinfo->flinfo->fn_extra = t;
    return t;
}

/* The table of a site, opened on first use when only its OID is known
 * (an error path; the reference is released with the transaction). */
static Relation site_rel(const fence_ext_site *s)
{
    Relation r;
    if (s->rel != NULL) {
        return s->rel;
    }
    r = try_relation_open(s->relid, AccessShareLock); /* released with the error */
    if (r == NULL) {
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
                        errmsg("fence: no table with OID %u", s->relid)));
    }
    if (r->rd_rel->relkind != RELKIND_RELATION &&
        r->rd_rel->relkind != RELKIND_PARTITIONED_TABLE) {
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("fence: %s is not a table", fence_ext_object(r))));
    }
    if (s->attnum < 1 || s->attnum > RelationGetDescr(r)->natts ||
        TupleDescAttr(RelationGetDescr(r), s->attnum - 1)->attisdropped) {
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN),
                        errmsg("fence: table %s has no column number %d", fence_ext_object(r),
                               (int)s->attnum)));
    }
    return r;
}

void fence_ext_no_token_at(const fence_ext_site *s, bool cleared)
{
    Relation rel = site_rel(s);
    char *obj = fence_ext_object(rel);
    if (cleared) {
        ereport(ERROR,
                (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '2')),
                 errmsg("fence: no fencing token for %s on %s (fence.token was cleared during "
                        "the statement)",
                        s->op, obj),
                 errdetail_internal("reason=missing"), errtablecol(rel, s->attnum)));
    }
    ereport(ERROR,
            (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '2')),
             errmsg("fence: no fencing token for %s on %s", s->op, obj),
             errdetail_internal("reason=missing"),
             errhint("Set it in the writing transaction: SELECT fence.use_token(<token>)."),
             errtablecol(rel, s->attnum)));
}

void fence_ext_no_token(const TriggerData *td, const fence_ext_trig *t,
                                                bool cleared)
{
    fence_ext_site s = {td->tg_relation, InvalidOid, t->attnum, fence_ext_op(td)};
    fence_ext_no_token_at(&s, cleared);
}

void fence_ext_stale(const fence_ext_site *s, int64 tok, int64 seen)
{
    Relation rel = site_rel(s);
    char *obj = fence_ext_object(rel);
    ereport(ERROR,
            (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '1')),
             errmsg("fence: stale token " INT64_FORMAT " for %s (highest seen " INT64_FORMAT ")",
                    tok, obj, seen),
             errdetail_internal("offered=" INT64_FORMAT " highest=" INT64_FORMAT
                                " kind=table object=%s reason=older",
                                tok, seen, obj),
             errtablecol(rel, s->attnum)));
}

/* The value of setting `name` (fence.token, fence.xact): NULL when unset
 * or ''.  The pointer is the setting's own, valid until it changes. */
static const char *setting(const char *name)
{
    const char *v = GetConfigOption(name, true, false);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* Whether the transaction's token was given to it by fence.use_token():
 * fence.xact is the id of the current (top-level) transaction, which this
 * assigns (the transaction is writing). */
static bool bound_to_this_transaction(void)
{
    const char *xact = setting("fence.xact");
    char mine[32];
    snprintf(mine, sizeof mine, UINT64_FORMAT, U64FromFullTransactionId(GetTopFullTransactionId()));
    return xact != NULL && strcmp(xact, mine) == 0;
}

bool fence_ext_token_at(const fence_ext_site *s, bool hint, bool bound, int64 *tok)
{
    const char *raw = setting("fence.token");
    uint64_t v = 0;
    if (raw == NULL) {
        return false;
    }
    if (fence__token_parse(raw, strlen(raw), &v) != 0) {
        int clip = pg_mbcharcliplen(raw, (int)strlen(raw), 40); /* left(raw, 40) */
        char *shown = quote_literal_cstr(pnstrdup(raw, clip));
        Relation rel = site_rel(s);
        ereport(ERROR,
                (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '2')),
                 errmsg("fence: malformed fencing token %s for %s on %s", shown, s->op,
                        fence_ext_object(rel)),
                 errdetail_internal("reason=malformed"),
                 hint ? errhint("fence.token must be a decimal integer 1..9223372036854775807, "
                                "no sign, spaces or leading zeros.")
                      : 0,
                 errtablecol(rel, s->attnum)));
    }
    if (bound && !bound_to_this_transaction()) {
        Relation rel = site_rel(s);
        ereport(ERROR,
                (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '2')),
                 errmsg("fence: fencing token for %s on %s was not set by fence.use_token() in "
                        "this transaction",
                        s->op, fence_ext_object(rel)),
                 errdetail_internal("reason=unbound setting=fence.token"),
                 errhint("Set it in the writing transaction with SELECT "
                         "fence.use_token(<token>): a value left by SET, ALTER ROLE/DATABASE "
                         "... SET or an earlier transaction of the connection is never "
                         "admitted."),
                 errtablecol(rel, s->attnum)));
    }
    *tok = (int64)v; /* <= FENCE_TOKEN_MAX, INT64_MAX */
    return true;
}

bool fence_ext_token(const TriggerData *td, const fence_ext_trig *t, bool hint, bool bound,
                     int64 *tok)
{
    fence_ext_site s = {td->tg_relation, InvalidOid, t->attnum, fence_ext_op(td)};
    return fence_ext_token_at(&s, hint, bound, tok);
}

int64 fence_ext_stamp(const TriggerData *td, const fence_ext_trig *t, HeapTuple tuple,
                      bool *isnull)
{
    Datum d = heap_getattr(tuple, t->attnum, RelationGetDescr(td->tg_relation), isnull);
    return *isnull ? 0 : DatumGetInt64(d);
}
