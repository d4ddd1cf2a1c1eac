/* guard.c -- fence.c_guard(): the BEFORE ROW INSERT/UPDATE/DELETE trigger
 * of a table fence.protect()ed with implementation 'c'.
 *
 * TG_ARGV[0] is the token column, TG_ARGV[1] 'strict' or 'permissive'.
 * The same rules as fence.sql's guard: the writer's token (fence.token,
 * set for the transaction) must be valid; an UPDATE or DELETE needs a
 * token >= the row's stamp (23Q01 otherwise); INSERT and UPDATE stamp the
 * row with the token, whatever the writer put in the column.  Permissive
 * mode admits a write with no token (INSERT stamps 0, UPDATE keeps the
 * stamp).  The hot path -- the row already carries exactly the writer's
 * token -- returns the row as it came, with no copy.
 *
 * Besides, it refuses (23Q03) an INSERT or UPDATE when a BEFORE ROW trigger
 * that fires after it (name order) could rewrite the column and the table
 * has no zz_fence_check_* trigger to catch that: fence.protect() adds the
 * check only when such a trigger exists, so one created later is caught
 * here until protect() runs again. */
#include "fence_ext.h"

#include "access/htup_details.h"

PG_FUNCTION_INFO_V1(fence_c_guard);

static void unchecked(const TriggerData *td, const fence_ext_trig *t,
                                              const char *later)
{
    char *obj = fence_ext_object(td->tg_relation);
    ereport(ERROR,
            (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '3')),
             errmsg("fence: trigger %s on %s fires after fence's guard and may rewrite %s, "
                    "but the table has no check trigger: %s refused; run fence.protect() on "
                    "the table again",
                    quote_identifier(later), obj,
                    quote_identifier(NameStr(
                        TupleDescAttr(RelationGetDescr(td->tg_relation), t->attnum - 1)->attname)),
                    fence_ext_op(td)),
             errdetail_internal("trigger=%s kind=table object=%s reason=unchecked", later, obj),
             errhint("Triggers fire in name order; fence.protect() adds the AFTER check "
                     "(zz_fence_check_*) when a BEFORE trigger fires after zz_fence_guard_*."),
             errtablecol(td->tg_relation, t->attnum)));
}

/* Return `tuple` with the token column set to v (the same tuple when it
 * already holds v). */
static HeapTuple stamped(const TriggerData *td, const fence_ext_trig *t, HeapTuple tuple, int64 v)
{
    bool isnull;
    int64 cur = fence_ext_stamp(td, t, tuple, &isnull);
    int cols[1] = {t->attnum};
    Datum vals[1] = {Int64GetDatum(v)};
    bool nulls[1] = {false};
    if (!isnull && cur == v) {
        return tuple;
    }
    return heap_modify_tuple_by_cols(tuple, RelationGetDescr(td->tg_relation), 1, cols, vals,
                                     nulls);
}

Datum fence_c_guard(PG_FUNCTION_ARGS)
{
    const fence_ext_trig *t = fence_ext_trig_of(fcinfo, "c_guard", false);
    TriggerData *td = (TriggerData *)fcinfo->context;
    int64 tok = 0;
    bool have;
    bool isnull;
    int64 seen;

    if (TRIGGER_FIRED_BY_INSERT(td->tg_event) && t->unchecked_ins != NULL) {
        unchecked(td, t, t->unchecked_ins);
    }
    if (TRIGGER_FIRED_BY_UPDATE(td->tg_event) && t->unchecked_upd != NULL) {
        unchecked(td, t, t->unchecked_upd);
    }
    have = fence_ext_token(td, t, true, true, &tok);
    if (!have && !t->permissive) {
        fence_ext_no_token(td, t, false);
    }

    if (TRIGGER_FIRED_BY_INSERT(td->tg_event)) {
        return PointerGetDatum(stamped(td, t, td->tg_trigtuple, have ? tok : 0));
    }

    /* The row rule is lib/common's (fence.sql's fence.stamp_rule): a token
     * at least the stamp.  A stamp below 0 (only an integer column an older
     * fence took over can hold one) admits what 0 does, as in SQL. */
    seen = fence_ext_stamp(td, t, td->tg_trigtuple, &isnull);
    if (have && fence__stamp_rule(seen > 0 ? (uint64_t)seen : 0, (uint64_t)tok) == FENCE__RULE_OLDER) {
        fence_ext_site s = {td->tg_relation, InvalidOid, t->attnum, fence_ext_op(td)};
        fence_ext_stale(&s, tok, seen);
    }
    if (TRIGGER_FIRED_BY_DELETE(td->tg_event)) {
        return PointerGetDatum(td->tg_trigtuple);
    }
    return PointerGetDatum(stamped(td, t, td->tg_newtuple, have ? tok : seen));
}

/* The same function under the symbol extension 1.4's catalog names
 * (fence--1.4.sql and every update to 1.4): a backend still running an
 * older fence.so, loaded before the package was upgraded, has no such
 * symbol, so its writes fail (42883) instead of applying the older rule.
 * The old symbol stays for a catalog not yet updated (the new rule under
 * either name). */
PG_FUNCTION_INFO_V1(fence_c_guard_v2);

Datum fence_c_guard_v2(PG_FUNCTION_ARGS)
{
    return fence_c_guard(fcinfo);
}
