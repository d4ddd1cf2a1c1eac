/* markrow.c -- find and lock a resource's mark in fence.marks without the
 * executor: fence.c_advance()'s hot path (advance.c).
 *
 * What SELECT ... FOR UPDATE does, step by step, as PostgreSQL's
 * ExecLockRows and its referential-integrity checks do it: a new command
 * and the transaction snapshot (a fresh one in READ COMMITTED), the
 * table's RowShareLock, a lookup in the key index, then
 * table_tuple_lock(LockTupleExclusive), which in READ COMMITTED waits for
 * a writer of the row and follows it to its latest version, and in
 * REPEATABLE READ / SERIALIZABLE fails with a serialization failure when
 * the row changed after the snapshot.  The lock is held to the end of the
 * transaction.  Used only while fence.marks has the shape fence.sql gives
 * it, and reads nothing the statement would not (see find_layout). */
#include "fence_ext.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type_d.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

/* fence.marks's layout, found on first use: the table it was read from,
 * the key index and the three columns' numbers.  key_idx InvalidOid with
 * layout_known: the direct read cannot be used (the statement is). */
static bool callback_registered;
static bool layout_known;
static Oid layout_relid = InvalidOid;
static Oid key_idx = InvalidOid;
static AttrNumber att_resource, att_token, att_holder;

/* Any invalidation of the table or its key index drops the layout (a new
 * or dropped index, ALTER TABLE, ANALYZE, a new child table, row security
 * invalidate the table). */
static void forget_layout(Datum arg, Oid relid)
{
    (void)arg;
    if (relid == InvalidOid || relid == layout_relid || relid == key_idx) {
        layout_known = false;
        layout_relid = InvalidOid;
        key_idx = InvalidOid;
    }
}

/* The number of column `name` of type `type` in desc, or InvalidAttrNumber. */
static AttrNumber column(TupleDesc desc, const char *name, Oid type)
{
    for (int i = 0; i < desc->natts; i++) {
        Form_pg_attribute a = TupleDescAttr(desc, i);
        if (!a->attisdropped && a->atttypid == type && strcmp(NameStr(a->attname), name) == 0) {
            return a->attnum;
        }
    }
    return InvalidAttrNumber;
}

/* Whether index idx is what "resource text PRIMARY KEY" makes: valid,
 * immediate, unique, on the column alone, no expression or predicate, no
 * indcheckxmin (which the planner would not use for an older snapshot). */
static bool key_index_ok(Oid idx)
{
    HeapTuple tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(idx));
    bool ok = false;
    if (HeapTupleIsValid(tup)) {
        Form_pg_index ind = (Form_pg_index)GETSTRUCT(tup);
        ok = ind->indnatts == 1 && ind->indnkeyatts == 1 && ind->indisunique &&
             ind->indimmediate && ind->indisvalid && ind->indisready && !ind->indcheckxmin &&
             ind->indkey.values[0] == att_resource &&
             heap_attisnull(tup, Anum_pg_index_indexprs, NULL) &&
             heap_attisnull(tup, Anum_pg_index_indpred, NULL);
        ReleaseSysCache(tup);
    }
    return ok;
}

/* The layout of rel into the statics.  The direct read is used only for a
 * plain table (not partitioned or foreign: those need the executor) with
 * no child tables (the statement reads them too) and no row security (the
 * owner the statement runs as may be subject to it). */
static void find_layout(Relation rel)
{
    TupleDesc desc = RelationGetDescr(rel);
    Oid idx = InvalidOid;

    att_resource = column(desc, "resource", TEXTOID);
    att_token = column(desc, "token", INT8OID);
    att_holder = column(desc, "holder", TEXTOID);
    if (rel->rd_rel->relkind == RELKIND_RELATION && !rel->rd_rel->relhassubclass &&
        !rel->rd_rel->relrowsecurity && att_resource != InvalidAttrNumber &&
        att_token != InvalidAttrNumber && att_holder != InvalidAttrNumber) {
        idx = RelationGetPrimaryKeyIndex(rel);
    }
    key_idx = idx != InvalidOid && key_index_ok(idx) ? idx : InvalidOid;
    layout_relid = RelationGetRelid(rel);
    layout_known = true;
}

/* Lock the row version at tid (found through snap) as FOR UPDATE does,
 * leaving the locked version in slot: whether it is still the mark of
 * `resource` (ExecLockRows's outcomes: a row changed by this very command
 * is skipped, a deleted one is gone; REPEATABLE READ / SERIALIZABLE raise
 * 40001 for a row changed after the snapshot). */
static bool lock_row(Relation rel, Relation idx, ItemPointer tid, Snapshot snap,
                     TupleTableSlot *slot, text *resource)
{
    TM_FailureData tmfd;
    int flags = TUPLE_LOCK_FLAG_LOCK_UPDATE_IN_PROGRESS;
    TM_Result r;
    bool isnull;
    Datum d;

    if (!IsolationUsesXactSnapshot()) {
        flags |= TUPLE_LOCK_FLAG_FIND_LAST_VERSION;
    }
    r = table_tuple_lock(rel, tid, snap, slot, GetCurrentCommandId(true), LockTupleExclusive,
                         LockWaitBlock, flags, &tmfd);
    switch (r) {
    case TM_Ok:
        if (!tmfd.traversed) {
            return true;
        }
        /* A newer version was locked: recheck the key, as EvalPlanQual
         * would, with the index's collation. */
        d = slot_getattr(slot, att_resource, &isnull);
        return !isnull && DatumGetBool(DirectFunctionCall2Coll(texteq, idx->rd_indcollation[0],
                                                               d, PointerGetDatum(resource)));
    case TM_SelfModified:
        return false;
    case TM_Updated:
    case TM_Deleted:
        if (IsolationUsesXactSnapshot()) {
            ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                            errmsg("could not serialize access due to concurrent update")));
        }
        if (r == TM_Deleted) {
            return false;
        }
        elog(ERROR, "fence: c_advance: unexpected table_tuple_lock status: %u", r);
        break;
    case TM_Invisible:
        elog(ERROR, "fence: c_advance: attempted to lock invisible tuple");
        break;
    default:
        elog(ERROR, "fence: c_advance: unrecognized table_tuple_lock status: %u", r);
        break;
    }
    return false;
}

/* Find the mark of `resource` through the key index and lock it; its
 * token and holder (NULL: none; copied into cxt) into *token, *holder. */
static bool find_and_lock(Relation rel, Relation idx, text *resource, int64 *token,
                          char **holder, MemoryContext cxt)
{
    Snapshot snap;
    ScanKeyData key;
    IndexScanDesc scan;
    TupleTableSlot *slot;
    ItemPointerData tid;
    bool found;
    bool isnull;
    Datum d;

    CommandCounterIncrement(); /* as SPI does before a statement that may write */
    snap = RegisterSnapshot(GetTransactionSnapshot());
    ScanKeyEntryInitialize(&key, 0, 1, BTEqualStrategyNumber, InvalidOid,
                           idx->rd_indcollation[0], F_TEXTEQ, PointerGetDatum(resource));
    slot = table_slot_create(rel, NULL);
    scan = index_beginscan(rel, idx, snap, 1, 0);
    index_rescan(scan, &key, 1, NULL, 0);
    found = index_getnext_slot(scan, ForwardScanDirection, slot);
    if (found) {
        tid = slot->tts_tid;
    }
    index_endscan(scan);
    if (found) {
        found = lock_row(rel, idx, &tid, snap, slot, resource);
    }
    if (found) {
        d = slot_getattr(slot, att_token, &isnull);
        *token = isnull ? 0 : DatumGetInt64(d);
        d = slot_getattr(slot, att_holder, &isnull);
        *holder = isnull ? NULL : MemoryContextStrdup(cxt, TextDatumGetCString(d));
    }
    ExecDropSingleTupleTableSlot(slot);
    UnregisterSnapshot(snap);
    return found;
}

bool fence_ext_lock_mark(Oid marks, text *resource, bool *found, int64 *token, char **holder,
                         MemoryContext cxt)
{
    Relation rel;
    Relation idx;

    if (!callback_registered) {
        CacheRegisterRelcacheCallback(forget_layout, (Datum)0);
        callback_registered = true;
    }
    /* What the executor checks before a locking statement (a row lock
     * writes: a standby or READ ONLY transaction refuses it). */
    PreventCommandIfReadOnly("SELECT FOR UPDATE");
    rel = table_open(marks, RowShareLock);
    if (!layout_known || layout_relid != RelationGetRelid(rel)) {
        find_layout(rel);
    }
    if (key_idx == InvalidOid) {
        table_close(rel, NoLock);
        return false;
    }
    idx = index_open(key_idx, AccessShareLock);
    if (idx->rd_rel->relkind != RELKIND_INDEX || idx->rd_rel->relam != BTREE_AM_OID ||
        idx->rd_opcintype[0] != TEXTOID) {
        index_close(idx, NoLock);
        table_close(rel, NoLock);
        return false;
    }
    *found = find_and_lock(rel, idx, resource, token, holder, cxt);
    index_close(idx, NoLock); /* the locks are kept to the end of the transaction */
    table_close(rel, NoLock);
    return true;
}
