//! Shims over the executor's routines whose signatures change between
//! PostgreSQL majors, or that the executor keeps static: the primary key
//! opened alone, the arbiter index, the index constraint check and index
//! insertion.

#[allow(unused_imports)]
use super::*;

/// `ExecOpenIndices` (speculative) for the primary key alone: the one
/// index a session that only looks uses (to probe and to find a key).
/// Without a primary key no index is open, and [`arbiter`] declines.
///
/// # Safety
/// `rri` is a result relation without open indexes; what is opened is
/// closed by `ExecCloseIndices`, as for `ExecOpenIndices`.
pub(super) unsafe fn open_primary_key(rri: *mut pg_sys::ResultRelInfo) {
    // SAFETY: as ExecOpenIndices, for one index: the arrays are allocated
    // in the current (executor state's) memory context.
    unsafe {
        (*rri).ri_NumIndices = 0;
        #[cfg(not(feature = "pg18"))]
        let pkey = pg_sys::RelationGetPrimaryKeyIndex((*rri).ri_RelationDesc);
        #[cfg(feature = "pg18")]
        let pkey = pg_sys::RelationGetPrimaryKeyIndex((*rri).ri_RelationDesc, false);
        if pkey == pg_sys::InvalidOid {
            return;
        }
        let index = pg_sys::index_open(pkey, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
        let info = pg_sys::BuildIndexInfo(index);
        if (*info).ii_Unique {
            pg_sys::BuildSpeculativeIndexInfo(index, info);
        }
        let descs: *mut pg_sys::Relation = pg_sys::palloc(std::mem::size_of::<pg_sys::Relation>()).cast();
        let infos: *mut *mut pg_sys::IndexInfo = pg_sys::palloc(std::mem::size_of::<*mut pg_sys::IndexInfo>()).cast();
        *descs = index;
        *infos = info;
        (*rri).ri_IndexRelationDescs = descs;
        (*rri).ri_IndexRelationInfo = infos;
        (*rri).ri_NumIndices = 1;
    }
}

/// The primary key, if it is on `(idem_key, source)` and every unique index
/// is immediate and none is an exclusion constraint (a deferred check
/// would need an AFTER trigger the executor queues and this module does
/// not).
///
/// For a session that only looks ([`open_primary_key`]) the other indexes
/// are not open, and not checked: they matter to writes alone.
///
/// # Safety
/// `rri` has its indexes open.
pub(super) unsafe fn arbiter(rri: *mut pg_sys::ResultRelInfo, layout: &Layout) -> Option<Oid> {
    // SAFETY: the arrays have ri_NumIndices entries (ExecOpenIndices).
    unsafe {
        #[cfg(not(feature = "pg18"))]
        let pkey = pg_sys::RelationGetPrimaryKeyIndex((*rri).ri_RelationDesc);
        // PostgreSQL 18 can report a deferrable primary key; ours is not.
        #[cfg(feature = "pg18")]
        let pkey = pg_sys::RelationGetPrimaryKeyIndex((*rri).ri_RelationDesc, false);
        let mut found = false;
        for i in 0..(*rri).ri_NumIndices as usize {
            let index = *(*rri).ri_IndexRelationDescs.add(i);
            let info = &**(*rri).ri_IndexRelationInfo.add(i);
            let form = &*(*index).rd_index;
            if !info.ii_ExclusionOps.is_null() || (form.indisunique && !form.indimmediate) {
                return None;
            }
            // Another unique index on exactly (idem_key, source), without
            // expressions or a predicate, is an arbiter of the SQL's
            // ON CONFLICT (idem_key, source) too (infer_arbiter_indexes):
            // with a collation of its own it could call other keys equal.
            // Only the SQL decides as the SQL does there.
            if form.indisunique
                && form.indexrelid != pkey
                && info.ii_Expressions.is_null()
                && info.ii_Predicate.is_null()
            {
                // as sets, as infer_arbiter_indexes compares them (a column
                // named twice counts once)
                let mut columns: Vec<i16> = info.ii_IndexAttrNumbers[..info.ii_NumIndexKeyAttrs as usize].to_vec();
                columns.sort_unstable();
                columns.dedup();
                let mut key = [layout.at[Col::IdemKey as usize] as i16 + 1, layout.at[Col::Source as usize] as i16 + 1];
                key.sort_unstable();
                if columns == key {
                    return None;
                }
            }
            if form.indexrelid == pkey {
                let columns = &info.ii_IndexAttrNumbers[..info.ii_NumIndexKeyAttrs as usize];
                let expected =
                    [layout.at[Col::IdemKey as usize] as i16 + 1, layout.at[Col::Source as usize] as i16 + 1];
                if columns != expected || info.ii_NumIndexAttrs != 2 || !info.ii_Predicate.is_null() {
                    return None;
                }
                found = true;
            }
        }
        found.then_some(pkey)
    }
}

/// Whether this transaction wrote `tuple`: its raw xmin is one of ours
/// (never hinted committed, nor frozen, while it runs).
/// HeapTupleHeaderGetXmin is ambiguous in pgrx's PostgreSQL 18 bindings,
/// so the header is read as it does.
///
/// # Safety
/// `tuple` is a heap tuple whose buffer is pinned.
pub(super) unsafe fn written_here(tuple: pg_sys::HeapTuple) -> bool {
    // SAFETY: per the contract.
    unsafe {
        let header = &*(*tuple).t_data;
        header.t_infomask & pg_sys::HEAP_XMIN_COMMITTED as u16 == 0
            && pg_sys::TransactionIdIsCurrentTransactionId(header.t_choice.t_heap.t_xmin)
    }
}

/// `ExecCheckIndexConstraints`, whose arguments changed in PostgreSQL 14
/// (the result relation) and 18 (the TID of a tuple being updated).
///
/// # Safety
/// As `ExecCheckIndexConstraints`.
pub(super) unsafe fn check_index_constraints(
    rri: *mut pg_sys::ResultRelInfo,
    slot: *mut pg_sys::TupleTableSlot,
    estate: *mut pg_sys::EState,
    conflict_tid: *mut pg_sys::ItemPointerData,
    arbiters: *mut pg_sys::List,
) -> bool {
    // SAFETY: forwarded (caller).
    unsafe {
        #[cfg(feature = "pg13")]
        {
            let _ = rri;
            pg_sys::ExecCheckIndexConstraints(slot, estate, conflict_tid, arbiters)
        }
        #[cfg(any(feature = "pg14", feature = "pg15", feature = "pg16", feature = "pg17"))]
        {
            pg_sys::ExecCheckIndexConstraints(rri, slot, estate, conflict_tid, arbiters)
        }
        #[cfg(feature = "pg18")]
        {
            let mut not_an_update = pg_sys::ItemPointerData::default();
            pg_sys::ExecCheckIndexConstraints(rri, slot, estate, conflict_tid, &mut not_an_update, arbiters)
        }
    }
}

/// `ExecInsertIndexTuples` for a new row with `noDupErr` (ON CONFLICT),
/// whose arguments changed in PostgreSQL 14 and 16.
///
/// # Safety
/// As `ExecInsertIndexTuples`.
pub(super) unsafe fn insert_index_tuples(
    rri: *mut pg_sys::ResultRelInfo,
    slot: *mut pg_sys::TupleTableSlot,
    estate: *mut pg_sys::EState,
    conflict: Option<&mut bool>,
    arbiters: *mut pg_sys::List,
) -> *mut pg_sys::List {
    let conflict = conflict.map_or(std::ptr::null_mut(), |c| c as *mut bool);
    // SAFETY: forwarded (caller).
    unsafe {
        super::super::index_predicates::reuse(rri);
        #[cfg(feature = "pg13")]
        {
            let _ = rri;
            pg_sys::ExecInsertIndexTuples(slot, estate, true, conflict, arbiters)
        }
        #[cfg(any(feature = "pg14", feature = "pg15"))]
        {
            pg_sys::ExecInsertIndexTuples(rri, slot, estate, false, true, conflict, arbiters)
        }
        #[cfg(any(feature = "pg16", feature = "pg17", feature = "pg18"))]
        {
            pg_sys::ExecInsertIndexTuples(rri, slot, estate, false, true, conflict, arbiters, false)
        }
    }
}

/// `ExecInsertIndexTuples` for the new version of an updated row (no
/// conflict handling: the unique check raises 23505 as an UPDATE's does),
/// as an update (`update = true`: the index-unchanged hint, which
/// [`Session::hint_unchanged_indexes`] has answered for every index).
///
/// # Safety
/// As `ExecInsertIndexTuples`.
pub(super) unsafe fn insert_index_tuples_for_update(
    rri: *mut pg_sys::ResultRelInfo,
    slot: *mut pg_sys::TupleTableSlot,
    estate: *mut pg_sys::EState,
    only_summarizing: bool,
) -> *mut pg_sys::List {
    // SAFETY: forwarded (caller).
    unsafe {
        super::super::index_predicates::reuse(rri);
        #[cfg(feature = "pg13")]
        {
            let _ = (rri, only_summarizing);
            pg_sys::ExecInsertIndexTuples(slot, estate, false, std::ptr::null_mut(), std::ptr::null_mut())
        }
        // 14: `update = false`, no hint (see Session::hint_unchanged_indexes)
        #[cfg(feature = "pg14")]
        {
            let _ = only_summarizing;
            pg_sys::ExecInsertIndexTuples(rri, slot, estate, false, false, std::ptr::null_mut(), std::ptr::null_mut())
        }
        #[cfg(feature = "pg15")]
        {
            let _ = only_summarizing;
            pg_sys::ExecInsertIndexTuples(rri, slot, estate, true, false, std::ptr::null_mut(), std::ptr::null_mut())
        }
        #[cfg(any(feature = "pg16", feature = "pg17", feature = "pg18"))]
        {
            pg_sys::ExecInsertIndexTuples(
                rri,
                slot,
                estate,
                true,
                false,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                only_summarizing,
            )
        }
    }
}
