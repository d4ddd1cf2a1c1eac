/* check.c -- fence.c_check(): the AFTER ROW INSERT/UPDATE trigger
 * (zz_fence_check_ins/_upd) that fence.protect() adds to a table protected
 * with implementation 'c' only when a BEFORE ROW trigger fires after the
 * guard (its name sorts after zz_fence_guard_*) and so could rewrite the
 * token column after the guard stamped it.
 *
 * The row as finally written must carry the stamp the guard gave it: the
 * writer's token or, with no token in permissive mode, the kept stamp
 * (OLD's on UPDATE, 0 on INSERT).  Otherwise 23Q03, DETAIL
 * written=N expected=M kind=table object=..., as fence.sql's check. */
#include "fence_ext.h"

PG_FUNCTION_INFO_V1(fence_c_check);

Datum fence_c_check(PG_FUNCTION_ARGS)
{
    const fence_ext_trig *t = fence_ext_trig_of(fcinfo, "c_check", true);
    TriggerData *td = (TriggerData *)fcinfo->context;
    HeapTuple final = TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple : td->tg_trigtuple;
    int64 want = 0;
    bool isnull;
    int64 written = fence_ext_stamp(td, t, final, &isnull);

    if (!fence_ext_token(td, t, false, false, &want)) {
        if (!t->permissive) {
            fence_ext_no_token(td, t, true);
        }
        want = 0;
        if (TRIGGER_FIRED_BY_UPDATE(td->tg_event)) {
            bool old_null;
            want = fence_ext_stamp(td, t, td->tg_trigtuple, &old_null);
        }
    }
    if (isnull || written != want) {
        char *obj = fence_ext_object(td->tg_relation);
        const char *w = isnull ? "NULL" : psprintf(INT64_FORMAT, written);
        const char *col =
            NameStr(TupleDescAttr(RelationGetDescr(td->tg_relation), t->attnum - 1)->attname);
        ereport(ERROR,
                (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '3')),
                 errmsg("fence: %s of %s was rewritten after the fencing check (%s written, "
                        INT64_FORMAT " expected) on %s",
                        quote_identifier(col), obj, w, want, fence_ext_op(td)),
                 errdetail_internal("written=%s expected=" INT64_FORMAT " kind=table object=%s",
                                    w, want, obj),
                 errhint("A BEFORE trigger that fires after zz_fence_guard_* (triggers fire in "
                         "name order) writes the token column; it must not."),
                 errtablecol(td->tg_relation, t->attnum)));
    }
    return PointerGetDatum(NULL);
}

/* The same function under the symbol extension 1.4's catalog names
 * (fence--1.4.sql and every update to 1.4): a backend still running an
 * older fence.so, loaded before the package was upgraded, has no such
 * symbol, so its writes fail (42883) instead of applying the older rule.
 * The old symbol stays for a catalog not yet updated (the new rule under
 * either name). */
PG_FUNCTION_INFO_V1(fence_c_check_v2);

Datum fence_c_check_v2(PG_FUNCTION_ARGS)
{
    return fence_c_check(fcinfo);
}
