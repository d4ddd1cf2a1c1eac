/* stamp.c -- fence.c_stamp(): the guard's rule for an UPDATE, as an
 * expression the planner hook of plan.c puts in the UPDATE's plan:
 *
 *   SET col = fence.c_stamp(col, <the statement's value for col, or col>,
 *                           <table>, <column number>, <permissive>,
 *                           <the guard's pg_trigger.tgenabled>)
 *
 * evaluated per row, on the row being replaced (again on its newest
 * version when READ COMMITTED re-checks a concurrently updated row).  Its
 * value is the row's new stamp, and it raises what fence.c_guard() raises
 * for an UPDATE, with the same SQLSTATE, message, DETAIL, HINT and fields:
 * a token lower than the row's stamp (23Q01), no token in strict mode, a
 * malformed token, a token or holder set for the session (23Q02).  With no
 * token in permissive mode it keeps the stamp (0 for NULL).  When the guard
 * would not fire (its trigger disabled under the session's
 * session_replication_role) it is the statement's own value.
 *
 * Called directly, it is a computation on its arguments and the session's
 * token: it writes nothing and needs no rights. */
#include "fence_ext.h"

#include "commands/trigger.h"

PG_FUNCTION_INFO_V1(fence_c_stamp);

bool fence_ext_fires(char enabled)
{
    if (enabled == TRIGGER_DISABLED) {
        return false;
    }
    if (SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA) {
        return enabled != TRIGGER_FIRES_ON_ORIGIN;
    }
    return enabled != TRIGGER_FIRES_ON_REPLICA;
}

Datum fence_c_stamp(PG_FUNCTION_ARGS)
{
    fence_ext_site s = {NULL, InvalidOid, InvalidAttrNumber, "UPDATE"};
    int64 seen;
    int64 tok = 0;

    for (int i = 2; i < 6; i++) {
        if (PG_ARGISNULL(i)) {
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                            errmsg("fence: c_stamp() takes a table, a column, a mode and a "
                                   "trigger state, none of them NULL")));
        }
    }
    if (!fence_ext_fires(PG_GETARG_CHAR(5))) {
        if (PG_ARGISNULL(1)) {
            PG_RETURN_NULL();
        }
        PG_RETURN_DATUM(PG_GETARG_DATUM(1));
    }
    s.relid = PG_GETARG_OID(2);
    s.attnum = PG_GETARG_INT16(3);
    seen = PG_ARGISNULL(0) ? 0 : PG_GETARG_INT64(0);
    if (!fence_ext_token_at(&s, true, true, &tok)) {
        if (!PG_GETARG_BOOL(4)) {
            fence_ext_no_token_at(&s, false);
        }
        PG_RETURN_INT64(seen); /* permissive: the stamp kept */
    }
    if (tok < seen) {
        fence_ext_stale(&s, tok, seen);
    }
    PG_RETURN_INT64(tok);
}
