/* send.c -- the writer's token and holder without PostgreSQL's settings
 * machinery: fence.c_send(token, holder) (version 1.3).
 *
 * set_config('fence.token', .., true) costs a one-row transaction ~2 us of
 * the server's CPU (the settings machinery: a lookup, a saved value, and
 * at the end of every transaction that set one a walk over all several
 * hundred settings), ~3 % of a fenced write.  c_send keeps the pair in this
 * backend's memory instead, for the current transaction, with SET LOCAL's
 * scoping: a savepoint rolled back drops what was sent in it, one released
 * hands it to its parent, the transaction's end (commit, abort, PREPARE)
 * drops it all -- a stack of entries keyed by subtransaction, kept by
 * transaction callbacks.
 *
 * Readers see it first: the C readers through fence_ext_setting()
 * (scope.c), the PL/pgSQL ones (current_setting) through the show hooks of
 * fence.token and fence.holder, which this module defines as real string
 * settings (PostgreSQL converts the placeholders, values and stacks
 * included).  Nothing is guessed between the two ways of setting the
 * token: while something is sent, a setting that was also changed in this
 * transaction (SET LOCAL, set_config, SET, RESET, a function's SET clause:
 * an entry on the setting's stack, which a rolled-back savepoint removes;
 * not RESET ALL of a setting that had no value, which changes nothing and
 * so leaves what was sent in force)
 * is a conflict, and every reader refuses it (23Q02 reason=conflict),
 * whichever came last; c_send itself refuses to send while there is one
 * (see fence_c_send).  A value set before the transaction (the session's)
 * is overridden, as SET LOCAL overrides it.
 *
 * Parallel workers would not see what was sent: PostgreSQL copies the
 * settings' own values into them, not what the show hooks return.  So
 * while something is sent, a query runs without workers (an executor-run
 * hook gives it a copy of its plan with parallelModeNeeded off, which
 * PostgreSQL's own ExecutePlan honours: Gather then runs its plan in the
 * leader) -- every current_setting() of the query runs where the sent
 * values are.  c_send refuses to run in parallel mode, as set_config
 * does. */
#include "fence_ext.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
#include "utils/memutils.h"

/* What one transaction level sent; in TopTransactionContext. */
typedef struct sent {
    SubTransactionId subid; /* the level that sent it (its parent's once released) */
    char *token;            /* '' for none, as set_config(.., NULL) leaves it */
    char *holder;
    struct sent *below; /* what an outer level sent, or NULL */
} sent;

static sent *g_top; /* the innermost entry; NULL when nothing is sent */
/* The transaction whose TopTransactionContext has our reset callback. */
static bool g_cb_registered;
static MemoryContextCallback g_cb;

/* The settings' own values, and their entries in guc.c's table (stable:
 * PostgreSQL never frees a defined setting). */
static char *g_token_value;
static char *g_holder_value;
static struct config_generic *g_token_guc;
static struct config_generic *g_holder_guc;

static ExecutorRun_hook_type prev_executor_run;

PG_FUNCTION_INFO_V1(fence_c_send);

static pg_attribute_noreturn() void conflict(const char *setting)
{
    ereport(ERROR,
            (errcode(MAKE_SQLSTATE('2', '3', 'Q', '0', '2')),
             errmsg("fence: %s was set twice in this transaction, by fence.c_send() and by "
                    "SET, set_config or a function's SET clause",
                    setting),
             errdetail_internal("reason=conflict setting=%s", setting),
             errhint("Set the token one way per transaction: libfence_pg's "
                     "fence_pg_set_token/fence_pg_send_token (which call fence.c_send), or SET "
                     "LOCAL fence.token, not both.")));
}

const char *fence_ext_sent(const char *name)
{
    bool token;
    struct config_generic *g;
    if (g_top == NULL) {
        return NULL;
    }
    token = strcmp(name, "fence.token") == 0;
    if (!token && strcmp(name, "fence.holder") != 0) {
        return NULL;
    }
    g = token ? g_token_guc : g_holder_guc;
    if (g == NULL || g->stack != NULL) { /* (not found: cannot tell, fail closed) */
        conflict(name);
    }
    return token ? g_top->token : g_top->holder;
}

/* What SHOW and current_setting() give: what was sent, else the
 * setting's own value. */
static const char *shown(const char *name, const char *own)
{
    const char *v = fence_ext_sent(name);
    return v != NULL ? v : own != NULL ? own : "";
}

static const char *show_token(void)
{
    return shown("fence.token", g_token_value);
}

static const char *show_holder(void)
{
    return shown("fence.holder", g_holder_value);
}

/* Argument i as a string in TopTransactionContext; NULL is ''. */
static char *arg_string(FunctionCallInfo fcinfo, int i)
{
    text *t;
    size_t n;
    char *s;
    if (PG_ARGISNULL(i)) {
        return MemoryContextStrdup(TopTransactionContext, "");
    }
    t = PG_GETARG_TEXT_PP(i);
    n = VARSIZE_ANY_EXHDR(t);
    s = MemoryContextAlloc(TopTransactionContext, n + 1);
    memcpy(s, VARDATA_ANY(t), n);
    s[n] = '\0';
    return s;
}

static void drop_entry(sent *e)
{
    pfree(e->token);
    pfree(e->holder);
    pfree(e);
}

/* Belt and braces: whatever happens to the transaction callbacks, the
 * stack goes when its memory does (PostgreSQL 15 deletes
 * TopTransactionContext at the end of every transaction). */
static void forget_all(void *arg)
{
    (void)arg;
    g_top = NULL;
    g_cb_registered = false;
}

/* fence.c_send(token text, holder text) RETURNS boolean: what
 * set_config('fence.token', token, true) and set_config('fence.holder',
 * holder, true) would set, for the readers of this transaction level;
 * true. */
Datum fence_c_send(PG_FUNCTION_ARGS)
{
    SubTransactionId sub = GetCurrentSubTransactionId();
    char *token;
    char *holder;
    if (IsInParallelMode()) {
        ereport(ERROR, (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
                        errmsg("fence: cannot send a token during a parallel operation")));
    }
    /* REFRESH MATERIALIZED VIEW, CREATE INDEX, ANALYZE, VACUUM, CLUSTER
     * ... run the object owner's code in a security-restricted operation
     * and undo its settings when it ends, with no subtransaction: what
     * that code sent would outlive it and replace the caller's token. */
    if (InSecurityRestrictedOperation()) {
        ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                        errmsg("fence: cannot send a token within a security-restricted "
                               "operation")));
    }
    /* Either setting changed in this transaction and still in force is a
     * conflict for the readers anyway; refusing here also covers the one
     * such change that can end before what is sent: a function's SET
     * clause (SET fence.token = .. or FROM CURRENT) ends at the function's
     * exit, not at a subtransaction's, and what was sent inside would
     * outlive it where a set_config inside would not. */
    if (g_token_guc == NULL || g_token_guc->stack != NULL) {
        conflict("fence.token");
    }
    if (g_holder_guc == NULL || g_holder_guc->stack != NULL) {
        conflict("fence.holder");
    }
    token = arg_string(fcinfo, 0);
    holder = arg_string(fcinfo, 1);
    if (!g_cb_registered) { /* once per TopTransactionContext */
        g_cb.func = forget_all;
        g_cb.arg = NULL;
        MemoryContextRegisterResetCallback(TopTransactionContext, &g_cb);
        g_cb_registered = true;
    }
    if (g_top != NULL && g_top->subid == sub) {
        /* Sent again at the same level: the new values replace the old
         * (the readers copy or parse what they read at once). */
        pfree(g_top->token);
        pfree(g_top->holder);
    } else {
        sent *e = MemoryContextAlloc(TopTransactionContext, sizeof *e);
        e->subid = sub;
        e->below = g_top;
        g_top = e;
    }
    g_top->token = token;
    g_top->holder = holder;
    PG_RETURN_BOOL(true);
}

static void on_xact(XactEvent event, void *arg)
{
    (void)arg;
    switch (event) {
    case XACT_EVENT_COMMIT:
    case XACT_EVENT_PARALLEL_COMMIT:
    case XACT_EVENT_ABORT:
    case XACT_EVENT_PARALLEL_ABORT:
    case XACT_EVENT_PREPARE:
        g_top = NULL; /* its memory goes with TopTransactionContext */
        break;
    default:
        break;
    }
}

/* A level's entry goes when it aborts; when it commits, it becomes its
 * parent's, replacing what the parent had sent.  Inner levels end before
 * outer ones, so only the top entry can belong to the level ending. */
static void on_subxact(SubXactEvent event, SubTransactionId mine, SubTransactionId parent,
                       void *arg)
{
    (void)arg;
    if (event == SUBXACT_EVENT_ABORT_SUB) {
        while (g_top != NULL && g_top->subid >= mine) {
            sent *e = g_top;
            g_top = e->below;
            drop_entry(e);
        }
    } else if (event == SUBXACT_EVENT_COMMIT_SUB && g_top != NULL && g_top->subid >= mine) {
        g_top->subid = parent;
        while (g_top->below != NULL && g_top->below->subid >= parent) {
            sent *e = g_top->below;
            g_top->below = e->below;
            drop_entry(e);
        }
    }
}

/* guc.c's entry of a setting this module defined (exact name: its own
 * spelling), looked up once. */
static struct config_generic *own_setting(const char *name)
{
    struct config_generic **vars = get_guc_variables();
    for (int i = 0; i < GetNumConfigOptions(); i++) {
        if (strcmp(vars[i]->name, name) == 0) {
            return vars[i];
        }
    }
    return NULL;
}

static void run_next(QueryDesc *qd, ScanDirection direction, uint64 count, bool execute_once)
{
    if (prev_executor_run != NULL) {
        prev_executor_run(qd, direction, count, execute_once);
    } else {
        standard_ExecutorRun(qd, direction, count, execute_once);
    }
}

/* A query that would start parallel workers while something is sent runs
 * without them (see the top of this file).  Its plan is never changed (it
 * may be a cached plan other transactions run): for this run the query
 * gets a flat copy (in its own executor memory), and its own plan back
 * afterwards, error or not -- so no copy piles up (a SQL function runs a
 * new query per call in a context that lives as long as its caller's) and
 * ExecutorEnd hooks see the plan they always saw.  A run that is not the
 * query's first or that fetches a limited count never starts workers
 * (ExecutePlan). */
static void fence_executor_run(QueryDesc *qd, ScanDirection direction, uint64 count,
                               bool execute_once)
{
    PlannedStmt *orig = qd->plannedstmt;
    PlannedStmt *serial;
    if (g_top == NULL || orig == NULL || !orig->parallelModeNeeded || qd->already_executed ||
        count != 0) {
        run_next(qd, direction, count, execute_once);
        return;
    }
    serial = MemoryContextAlloc(qd->estate->es_query_cxt, sizeof *serial);
    *serial = *orig;
    serial->parallelModeNeeded = false;
    qd->plannedstmt = serial;
    PG_TRY();
    {
        run_next(qd, direction, count, execute_once);
    }
    PG_FINALLY();
    {
        qd->plannedstmt = orig;
        pfree(serial);
    }
    PG_END_TRY();
}

void fence_ext_send_init(void)
{
    DefineCustomStringVariable("fence.token",
                               "The writer's fencing token, for this transaction only (SET "
                               "LOCAL).",
                               "fence.c_send() sets it without the settings machinery.",
                               &g_token_value, "", PGC_USERSET, GUC_NOT_IN_SAMPLE, NULL, NULL,
                               show_token);
    DefineCustomStringVariable("fence.holder",
                               "The writer's lease holder id (32 lowercase hex digits), for "
                               "this transaction only (SET LOCAL).",
                               "fence.c_send() sets it without the settings machinery.",
                               &g_holder_value, "", PGC_USERSET, GUC_NOT_IN_SAMPLE, NULL, NULL,
                               show_holder);
    g_token_guc = own_setting("fence.token");
    g_holder_guc = own_setting("fence.holder");
    prev_executor_run = ExecutorRun_hook;
    ExecutorRun_hook = fence_executor_run;
    RegisterXactCallback(on_xact, NULL);
    RegisterSubXactCallback(on_subxact, NULL);
}
