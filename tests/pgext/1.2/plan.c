/* plan.c -- an UPDATE of a table guarded by fence.c_guard() without the
 * trigger: the guard's rule computed in the statement's plan (version 1.2).
 *
 * Any BEFORE UPDATE row trigger makes PostgreSQL lock the old row (a WAL
 * record) and call the trigger manager for every row, whatever the trigger
 * does: the largest part of what fencing added to a one-row UPDATE after
 * the token's own statement.  When this module is loaded in a backend (a C
 * function of the extension was called, fence_pg_prepare() called one, or
 * session_preload_libraries / shared_preload_libraries name it):
 *
 *   planner hook  an UPDATE whose target table is guarded by c_guard,
 *                 the only BEFORE UPDATE row trigger there, gets the token
 *                 column assigned fence.c_stamp(col, <its own value for
 *                 col, or col>, table, column, mode, tgenabled) (stamp.c),
 *                 placed so that every expression runs in the order it
 *                 ran before the trigger (stamp_position()).
 *   executor-start hook  for such a plan -- verified from the plan itself:
 *                 one plain result relation, scanned by the node under the
 *                 ModifyTable, whose update of the column is exactly that
 *                 call on the scanned row's own column, with arguments
 *                 matching the guard in this execution's copy of the
 *                 table's triggers -- clears trig_update_before_row in
 *                 that copy (ResultRelInfo.ri_TrigDesc, private to this
 *                 execution), so the executor skips the guard.
 *
 * Anything else keeps the trigger: other BEFORE UPDATE row triggers (they
 * would fire after the stamp), child tables, partitioned or foreign
 * tables, stored generated columns, WHEN clauses or column lists on the
 * guard, a statement planned before the module was loaded, joins (UPDATE
 * ... FROM), a plan with a node between the scan and the ModifyTable, ON
 * CONFLICT, MERGE, updates in WITH, c_stamp not EXECUTE to PUBLIC,
 * fence.plan_stamp off (a switch for comparing the two ways).  A
 * plan made while the conditions held and run after they stopped holding
 * keeps both (the stamp and the trigger, which then admits the stamped
 * row): PostgreSQL replans when the table's triggers change. */
#include "fence_ext.h"

/* What this file relies on (an UPDATE's target list at planner entry, the
 * per-execution copy of the trigger descriptor, the plan nodes' layout) is
 * PostgreSQL 15's; read it again before building for another major. */
#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 160000
#error "lib/pgext/plan.c is written for PostgreSQL 15"
#endif

#include "access/table.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type_d.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "nodes/execnodes.h"
#include "optimizer/optimizer.h"
#include "optimizer/planner.h"
#include "parser/parsetree.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

/* fence.plan_stamp: off keeps the trigger for every statement (planned
 * or run while off); a switch for comparing the two, never a safety
 * setting -- both enforce the same rule. */
static bool g_plan_stamp = true;

static planner_hook_type prev_planner;
static ExecutorStart_hook_type prev_executor_start;

/* fence.c_guard's and fence.c_stamp's OIDs in this database, once seen
 * (g_no_stamp: c_stamp looked for and not there, an extension older than
 * 1.2); forgotten on any change to pg_proc. */
static Oid g_guard_fn = InvalidOid;
static Oid g_stamp_fn = InvalidOid;
static bool g_no_stamp = false;

static void forget_functions(Datum arg, int cacheid, uint32 hashvalue)
{
    (void)arg;
    (void)cacheid;
    (void)hashvalue;
    g_guard_fn = InvalidOid;
    g_stamp_fn = InvalidOid;
    g_no_stamp = false;
}

/* Whether function fn is C function addr of this module. */
static bool is_ours(Oid fn, PGFunction addr)
{
    FmgrInfo fi;
    bool c_lang;
    HeapTuple tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
    if (!HeapTupleIsValid(tup)) {
        return false;
    }
    c_lang = ((Form_pg_proc)GETSTRUCT(tup))->prolang == ClanguageId;
    ReleaseSysCache(tup);
    if (!c_lang) {
        return false;
    }
    fmgr_info(fn, &fi);
    return fi.fn_addr == addr;
}

static bool is_guard_fn(Oid fn)
{
    if (OidIsValid(g_guard_fn)) {
        return fn == g_guard_fn;
    }
    if (!is_ours(fn, fence_c_guard)) {
        return false;
    }
    g_guard_fn = fn;
    return true;
}

/* fence.c_stamp in the schema of the guard function guard_fn, or
 * InvalidOid (the extension is older than 1.2).  Looked up in the catalog
 * directly: the writer may have no USAGE on that schema (fence.grant()
 * does not give it) and needs none for the guard. */
static Oid stamp_fn(Oid guard_fn)
{
    static const Oid args[6] = {INT8OID, INT8OID, OIDOID, INT2OID, BOOLOID, CHAROID};
    Oid fn;
    if (OidIsValid(g_stamp_fn) || g_no_stamp) {
        return g_stamp_fn;
    }
    fn = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid, CStringGetDatum("c_stamp"),
                         PointerGetDatum(buildoidvector(args, 6)),
                         ObjectIdGetDatum(get_func_namespace(guard_fn)));
    if (!OidIsValid(fn) || !is_ours(fn, fence_c_stamp)) {
        g_no_stamp = true;
        return InvalidOid;
    }
    g_stamp_fn = fn;
    return fn;
}

/* The table's guard, when c_guard is its only BEFORE UPDATE row trigger
 * (disabled ones aside), has no WHEN clause or column list, and names a
 * bigint column that is not generated. */
typedef struct guard_info {
    const Trigger *tg;
    AttrNumber attnum;
    bool permissive;
} guard_info;

static bool find_guard(Relation rel, const TriggerDesc *desc, guard_info *g)
{
    const Trigger *found = NULL;
    TupleDesc td = RelationGetDescr(rel);
    if (desc == NULL) {
        return false;
    }
    for (int i = 0; i < desc->numtriggers; i++) {
        const Trigger *tg = &desc->triggers[i];
        if (!TRIGGER_FOR_ROW(tg->tgtype) || !TRIGGER_FOR_BEFORE(tg->tgtype) ||
            !TRIGGER_FOR_UPDATE(tg->tgtype) || tg->tgenabled == TRIGGER_DISABLED) {
            continue;
        }
        if (found != NULL) {
            return false;
        }
        found = tg;
    }
    if (found == NULL || found->tgnargs != 2 || found->tgnattr != 0 || found->tgqual != NULL ||
        (strcmp(found->tgargs[1], "strict") != 0 && strcmp(found->tgargs[1], "permissive") != 0) ||
        !is_guard_fn(found->tgfoid)) {
        return false;
    }
    g->tg = found;
    g->permissive = strcmp(found->tgargs[1], "permissive") == 0;
    g->attnum = InvalidAttrNumber;
    for (int i = 0; i < td->natts; i++) {
        Form_pg_attribute a = TupleDescAttr(td, i);
        if (!a->attisdropped && strcmp(NameStr(a->attname), found->tgargs[0]) == 0) {
            if (a->atttypid != INT8OID || a->attgenerated != '\0') {
                return false;
            }
            g->attnum = a->attnum;
            break;
        }
    }
    return g->attnum != InvalidAttrNumber;
}

/* An expression that cannot fail or act: evaluating it earlier or later
 * than another changes nothing.  (Used on expressions already folded.) */
static bool inert_node(const Expr *e)
{
    if (IsA(e, RelabelType)) {
        return inert_node(((const RelabelType *)e)->arg);
    }
    if (IsA(e, Var)) {
        return ((const Var *)e)->varlevelsup == 0;
    }
    if (IsA(e, Param)) {
        return ((const Param *)e)->paramkind == PARAM_EXTERN;
    }
    return IsA(e, Const);
}

/* The same after constant folding (`SET col = 3` assigns int8(3), which
 * the planner folds next anyway, raising what it raises now). */
static bool inert(const Expr *e)
{
    return inert_node((const Expr *)eval_const_expressions(NULL, copyObject((Node *)e)));
}

/* Where the stamp goes among the UPDATE q's assignments, so that every
 * expression runs in the order it would before the trigger: after all of
 * them, with the statement's own assignment of the column (taken out into
 * *own) run inside the stamp -- unless that own assignment is not inert
 * and an assignment after its place is not either: then at its place
 * (when everything after it is inert) or, returning -1, nowhere (keep the
 * trigger). */
static int stamp_position(Query *q, AttrNumber attnum, Expr **own)
{
    ListCell *lc;
    int n = 0;
    int at = -1;
    bool later_inert = true;
    *own = NULL;
    foreach (lc, q->targetList) {
        TargetEntry *tle = lfirst_node(TargetEntry, lc);
        if (tle->resjunk) {
            break;
        }
        if (tle->resno == attnum && at < 0) {
            at = n;
            *own = tle->expr;
        } else if (at >= 0 && !inert(tle->expr)) {
            later_inert = false;
        }
        n++;
    }
    if (at < 0) {
        return n;
    }
    if (!inert(*own) && !later_inert) {
        *own = NULL;
        return -1;
    }
    q->targetList = list_delete_nth_cell(q->targetList, at);
    return inert(*own) ? n - 1 : at;
}

/* The planner hook's work: assign the stamp to the guarded column of the
 * UPDATE q when the conditions above hold. */
static void stamp_update(Query *q)
{
    RangeTblEntry *rte = rt_fetch(q->resultRelation, q->rtable);
    Relation rel;
    guard_info g;
    Oid fn = InvalidOid;
    Expr *own = NULL;
    int pos;

    if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_RELATION ||
        q->onConflict != NULL) {
        return;
    }
    rel = table_open(rte->relid, NoLock); /* locked by the parser or plancache */
    if ((!rte->inh || !rel->rd_rel->relhassubclass) &&
        (rel->rd_att->constr == NULL || !rel->rd_att->constr->has_generated_stored) &&
        find_guard(rel, rel->trigdesc, &g)) {
        fn = stamp_fn(g.tg->tgfoid);
    }
    /* PUBLIC's right, not the current role's: a cached plan may run
     * under any role of the session (SET ROLE, SECURITY DEFINER). */
    /* (PostgreSQL 15 maps an UPDATE's assignments to columns by resno, in
     * any order.) */
    if (OidIsValid(fn) && pg_proc_aclcheck(fn, ACL_ID_PUBLIC, ACL_EXECUTE) == ACLCHECK_OK &&
        (pos = stamp_position(q, g.attnum, &own)) >= 0) {
        Var *old = makeVar(q->resultRelation, g.attnum, INT8OID, -1, InvalidOid, 0);
        List *args = list_make2(old, own != NULL ? own : (Expr *)copyObject(old));
        args = lappend(args, makeConst(OIDOID, -1, InvalidOid, sizeof(Oid),
                                       ObjectIdGetDatum(RelationGetRelid(rel)), false, true));
        args = lappend(args, makeConst(INT2OID, -1, InvalidOid, sizeof(int16),
                                       Int16GetDatum(g.attnum), false, true));
        args = lappend(args, makeBoolConst(g.permissive, false));
        args = lappend(args, makeConst(CHAROID, -1, InvalidOid, 1,
                                       CharGetDatum(g.tg->tgenabled), false, true));
        q->targetList = list_insert_nth(
            q->targetList, pos,
            makeTargetEntry((Expr *)makeFuncExpr(fn, INT8OID, args, InvalidOid, InvalidOid,
                                                 COERCE_EXPLICIT_CALL),
                            g.attnum,
                            pstrdup(NameStr(TupleDescAttr(RelationGetDescr(rel),
                                                          g.attnum - 1)->attname)),
                            false));
    }
    table_close(rel, NoLock);
}

static PlannedStmt *fence_planner(Query *parse, const char *query_string, int cursor_options,
                                  ParamListInfo bound_params)
{
    if (g_plan_stamp && parse->commandType == CMD_UPDATE && parse->resultRelation > 0) {
        stamp_update(parse);
    }
    if (prev_planner != NULL) {
        return prev_planner(parse, query_string, cursor_options, bound_params);
    }
    return standard_planner(parse, query_string, cursor_options, bound_params);
}

/* The expression a ModifyTable's subplan computes for column attnum of
 * its (only) result relation, or NULL (also when two compute it). */
static Expr *update_expr(const Plan *sub, List *colnos, AttrNumber attnum)
{
    ListCell *cc = list_head(colnos);
    ListCell *lc;
    Expr *found = NULL;
    foreach (lc, sub->targetlist) {
        TargetEntry *tle = lfirst_node(TargetEntry, lc);
        if (tle->resjunk) {
            continue;
        }
        if (cc == NULL) {
            return NULL;
        }
        if (lfirst_int(cc) == attnum) {
            if (found != NULL) {
                return NULL;
            }
            found = tle->expr;
        }
        cc = lnext(colnos, cc);
    }
    return found;
}

static bool const_is(const Node *n, Oid type, Datum v)
{
    const Const *c = (const Const *)n;
    return n != NULL && IsA(n, Const) && c->consttype == type && !c->constisnull &&
           c->constvalue == v;
}

/* Whether the plan of mt stamps its result relation's guarded column as
 * stamp_update() does, on the row its scan reads. */
static bool plan_stamps(const ModifyTableState *mt, const guard_info *g)
{
    const ModifyTable *node = (const ModifyTable *)mt->ps.plan;
    const Plan *sub = outerPlan(node);
    Relation rel = mt->resultRelInfo->ri_RelationDesc;
    Index scanrelid;
    const FuncExpr *f;
    const Var *old;
    if (sub == NULL || list_length(node->resultRelations) != 1 ||
        list_length(node->updateColnosLists) != 1) {
        return false;
    }
    switch (nodeTag(sub)) {
    case T_SeqScan:
    case T_SampleScan:
    case T_IndexScan:
    case T_BitmapHeapScan:
    case T_TidScan:
    case T_TidRangeScan:
        scanrelid = ((const Scan *)sub)->scanrelid;
        break;
    default:
        return false;
    }
    if (scanrelid != (Index)linitial_int(node->resultRelations)) {
        return false;
    }
    f = (const FuncExpr *)update_expr(sub, linitial(node->updateColnosLists), g->attnum);
    if (f == NULL || !IsA(f, FuncExpr) || list_length(f->args) != 6 ||
        f->funcid != stamp_fn(g->tg->tgfoid)) {
        return false;
    }
    old = linitial(f->args);
    return IsA(old, Var) && old->varno == (int)scanrelid && old->varattno == g->attnum &&
           old->varlevelsup == 0 &&
           const_is(lthird(f->args), OIDOID, ObjectIdGetDatum(RelationGetRelid(rel))) &&
           const_is(lfourth(f->args), INT2OID, Int16GetDatum(g->attnum)) &&
           const_is(list_nth(f->args, 4), BOOLOID, BoolGetDatum(g->permissive)) &&
           const_is(list_nth(f->args, 5), CHAROID, CharGetDatum(g->tg->tgenabled));
}

static void fence_executor_start(QueryDesc *qd, int eflags)
{
    if (prev_executor_start != NULL) {
        prev_executor_start(qd, eflags);
    } else {
        standard_ExecutorStart(qd, eflags);
    }
    if (g_plan_stamp && qd->operation == CMD_UPDATE && (eflags & EXEC_FLAG_EXPLAIN_ONLY) == 0 &&
        qd->planstate != NULL && IsA(qd->planstate, ModifyTableState)) {
        ModifyTableState *mt = (ModifyTableState *)qd->planstate;
        const ModifyTable *node = (const ModifyTable *)mt->ps.plan;
        TriggerDesc *desc = mt->mt_nrels == 1 ? mt->resultRelInfo->ri_TrigDesc : NULL;
        guard_info g;
        if (mt->operation == CMD_UPDATE && node->rootRelation == 0 &&
            node->onConflictAction == ONCONFLICT_NONE && desc != NULL &&
            desc != mt->resultRelInfo->ri_RelationDesc->trigdesc &&
            desc->trig_update_before_row &&
            mt->resultRelInfo->ri_RelationDesc->rd_rel->relkind == RELKIND_RELATION &&
            find_guard(mt->resultRelInfo->ri_RelationDesc, desc, &g) &&
            fence_ext_fires(g.tg->tgenabled) && plan_stamps(mt, &g)) {
            desc->trig_update_before_row = false; /* this execution's copy */
        }
    }
}

PGDLLEXPORT void _PG_init(void);

/* Loading the module (in any way) installs the hooks in this backend. */
void _PG_init(void)
{
    DefineCustomBoolVariable("fence.plan_stamp",
                             "Whether an UPDATE of a table guarded by fence.c_guard() computes "
                             "the guard's rule in its plan instead of firing the trigger.",
                             "Both enforce the same rule; off keeps the trigger.", &g_plan_stamp,
                             true, PGC_USERSET, 0, NULL, NULL, NULL);
    prev_planner = planner_hook;
    planner_hook = fence_planner;
    prev_executor_start = ExecutorStart_hook;
    ExecutorStart_hook = fence_executor_start;
    CacheRegisterSyscacheCallback(PROCOID, forget_functions, (Datum)0);
}
