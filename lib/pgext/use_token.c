/* use_token.c -- fence.c_use_token(token, holder): fence.sql's
 * fence.use_token() in C (extension 1.5).  The same checks in the same
 * order, the same errors (SQLSTATE, message, DETAIL, HINT) and the same
 * three transaction-local settings: fence.token (the token's canonical
 * text), fence.holder (the holder, '' for none) and fence.xact (the id of
 * the top-level transaction, assigned here, as pg_current_xact_id() gives
 * it), set as set_config(name, value, true) sets them.  A refused call
 * sets nothing.  What it saves is PL/pgSQL's call and its three
 * set_config calls through the executor (docs/postgres-extension.md). */
#include "fence_ext.h"

#include "access/transam.h"
#include "access/xact.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/guc.h"

PG_FUNCTION_INFO_V1(fence_c_use_token);

/* Whether the n bytes at h are a holder id: 32 lowercase hex digits
 * (fence.use_token's '^[0-9a-f]{32}$'). */
static bool holder_ok(const char *h, int n)
{
    if (n != 32) {
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f'))) {
            return false;
        }
    }
    return true;
}

/* set_config(name, value, true) as set_config_by_name runs it. */
static void set_local(const char *name, const char *value)
{
    (void)set_config_option(name, value, superuser() ? PGC_SUSET : PGC_USERSET, PGC_S_SESSION,
                            GUC_ACTION_LOCAL, true, 0, false);
}

Datum fence_c_use_token(PG_FUNCTION_ARGS)
{
    int64 token;
    const char *holder = "";
    char tok[32];
    char xact[32];

    if (PG_ARGISNULL(0)) {
        ereport(ERROR, (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '2')),
                        errmsg("fence: use_token: no fencing token (NULL)"),
                        errdetail_internal("reason=missing")));
    }
    token = PG_GETARG_INT64(0);
    if (token <= 0) {
        ereport(ERROR, (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '2')),
                        errmsg("fence: use_token: malformed fencing token " INT64_FORMAT
                               " (tokens are 1..9223372036854775807)",
                               token),
                        errdetail_internal("reason=malformed")));
    }
    if (!PG_ARGISNULL(1)) {
        text *h = PG_GETARG_TEXT_PP(1);
        const char *p = VARDATA_ANY(h);
        int n = (int)VARSIZE_ANY_EXHDR(h);
        if (n > 0 && !holder_ok(p, n)) {
            int clip = pg_mbcharcliplen(p, n, 40); /* left(holder, 40) */
            ereport(ERROR,
                    (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '2')),
                     errmsg("fence: use_token: malformed holder %s",
                            quote_literal_cstr(pnstrdup(p, clip))),
                     errdetail_internal("reason=malformed setting=fence.holder"),
                     errhint("The holder is the lease's holder id, 32 lowercase hex digits, or "
                             "NULL or empty for none.")));
        }
        holder = text_to_cstring(h);
    }
    /* pg_current_xact_id(): refused on a standby, then an id assigned. */
    PreventCommandDuringRecovery("fence.c_use_token()");
    snprintf(xact, sizeof xact, UINT64_FORMAT,
             U64FromFullTransactionId(GetTopFullTransactionId()));
    snprintf(tok, sizeof tok, INT64_FORMAT, token);
    set_local("fence.token", tok);
    set_local("fence.holder", holder);
    set_local("fence.xact", xact);
    PG_RETURN_INT64(token);
}
