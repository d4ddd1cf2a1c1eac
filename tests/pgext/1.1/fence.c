/* fence.c -- the PostgreSQL extension "fence": the module, its version,
 * and what the guard and the check share (the trigger's cache, the
 * writer's token, fence.sql's error reports).  See fence_ext.h. */
#include "fence_ext.h"

#include "access/htup_details.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type_d.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
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

/* A canonical decimal token 1..9223372036854775807 (no sign, spaces or
 * leading zeros), fence.sql's ^[1-9][0-9]{0,18}$ and range check. */
static bool parse_token(const char *raw, int64 *out)
{
    uint64 v = 0;
    size_t n = strlen(raw);
    if (n < 1 || n > 19 || raw[0] < '1' || raw[0] > '9') {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (raw[i] < '0' || raw[i] > '9') {
            return false;
        }
        v = v * 10 + (uint64)(raw[i] - '0'); /* 19 digits fit in uint64 */
    }
    if (v > (uint64)PG_INT64_MAX) {
        return false;
    }
    *out = (int64)v;
    return true;
}

pg_attribute_noreturn() void fence_ext_no_token(const TriggerData *td, const fence_ext_trig *t,
                                                bool cleared)
{
    const char *op = fence_ext_op(td);
    char *obj = fence_ext_object(td->tg_relation);
    if (cleared) {
        ereport(ERROR,
                (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '2')),
                 errmsg("fence: no fencing token for %s on %s (fence.token was cleared during "
                        "the statement)",
                        op, obj),
                 errdetail_internal("reason=missing"), errtablecol(td->tg_relation, t->attnum)));
    }
    ereport(ERROR,
            (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '2')),
             errmsg("fence: no fencing token for %s on %s", op, obj),
             errdetail_internal("reason=missing"),
             errhint("Set it in the writing transaction: SET LOCAL fence.token = <token>."),
             errtablecol(td->tg_relation, t->attnum)));
}

/* 23Q02 for `setting`, set for the session rather than the transaction. */
static pg_attribute_noreturn() void session_setting(const TriggerData *td,
                                                    const fence_ext_trig *t,
                                                    const char *setting)
{
    ereport(ERROR,
            (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '2')),
             errmsg("fence: %s is set for the session, not for the transaction, for %s on %s",
                    setting, fence_ext_op(td), fence_ext_object(td->tg_relation)),
             errdetail_internal("reason=session setting=%s", setting),
             errhint("A session-level setting (SET without LOCAL, set_config(..., false), ALTER "
                     "ROLE/DATABASE ... SET) applies to every later transaction of the "
                     "connection.  Set it in the writing transaction: SET LOCAL %s = ..., or "
                     "set_config('%s', ..., true); RESET %s clears the session's value.",
                     setting, setting, setting),
             errtablecol(td->tg_relation, t->attnum)));
}

bool fence_ext_token(const TriggerData *td, const fence_ext_trig *t, bool hint,
                     bool refuse_session, int64 *tok)
{
    const char *raw = NULL;
    fence_ext_scope scope = fence_ext_setting("fence.token", &raw);
    if (scope == FENCE_SCOPE_UNSET) {
        return false;
    }
    if (!parse_token(raw, tok)) {
        int clip = pg_mbcharcliplen(raw, (int)strlen(raw), 40); /* left(raw, 40) */
        char *shown = quote_literal_cstr(pnstrdup(raw, clip));
        ereport(ERROR,
                (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '2')),
                 errmsg("fence: malformed fencing token %s for %s on %s", shown,
                        fence_ext_op(td), fence_ext_object(td->tg_relation)),
                 errdetail_internal("reason=malformed"),
                 hint ? errhint("fence.token must be a decimal integer 1..9223372036854775807, "
                                "no sign, spaces or leading zeros.")
                      : 0,
                 errtablecol(td->tg_relation, t->attnum)));
    }
    if (refuse_session) {
        const char *holder = NULL;
        if (scope == FENCE_SCOPE_SESSION) {
            session_setting(td, t, "fence.token");
        }
        if (fence_ext_setting("fence.holder", &holder) == FENCE_SCOPE_SESSION) {
            session_setting(td, t, "fence.holder");
        }
    }
    return true;
}

int64 fence_ext_stamp(const TriggerData *td, const fence_ext_trig *t, HeapTuple tuple,
                      bool *isnull)
{
    Datum d = heap_getattr(tuple, t->attnum, RelationGetDescr(td->tg_relation), isnull);
    return *isnull ? 0 : DatumGetInt64(d);
}
