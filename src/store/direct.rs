//! The first delivery of a key, stored without an SQL plan.
//!
//! A claim of a new key is what a receiver does most, and through SPI it
//! costs more in executor start-up (opening the table and its indexes,
//! building the projections of `INSERT ... ON CONFLICT DO UPDATE ...
//! RETURNING`) than in the insert itself. This module performs the same
//! insert with the executor's own routines and nothing else, in the order
//! `ExecInsert` (PostgreSQL's `nodeModifyTable.c`) uses for `ON CONFLICT`:
//!
//! 1. `ExecCheckIndexConstraints` probes the primary key, the arbiter,
//!    waiting for a transaction that is inserting the same key; a key that
//!    exists is left to the SQL path ([`Direct::Known`]);
//! 2. the row is inserted speculatively (`tuple_insert_speculative` under
//!    a `SpeculativeInsertionLockAcquire` token), then its index entries
//!    (`ExecInsertIndexTuples`, which tells of a conflict that arose in
//!    between), then the insertion is confirmed or killed
//!    (`tuple_complete_speculative`); a conflict starts over at step 1.
//!
//! So the arbitration is PostgreSQL's own, byte for byte that of the SQL
//! statement. What the SQL statement would do besides is checked instead,
//! and when any of it applies this module declines ([`Direct::Declined`])
//! and the caller runs the statement (`claim_upsert.sql`): the table must be
//! exactly the one the extension created (same columns and types, no
//! defaults or NOT NULL on the columns a claim leaves NULL, no CHECK
//! constraint or generated column, no trigger, no row-level security for
//! the caller, every unique index immediate and no exclusion constraint,
//! the primary key on `(idem_key, source)`), and the caller must hold
//! INSERT, SELECT and UPDATE on it (the statement's table privileges; a
//! caller with column privileges only goes through SQL, which checks them).
//! The table's shape is checked once per relation cache generation
//! ([`super::cache`]); privileges and RLS on every call.

use super::cache;
use super::claim::Delivery;
use crate::time::timestamptz;
use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::{IntoDatum, PgTupleDesc};
use std::cell::Cell;

/// What [`insert_claim`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direct {
    /// The key was new: stored, leased to the delivery's token.
    Inserted,
    /// The key exists (committed, or inserted earlier by this transaction):
    /// nothing was written.
    Known,
    /// The table is not as this module needs it, or the caller lacks a
    /// table privilege: nothing was written; use the SQL statement.
    Declined,
}

/// The columns of `webhook_dedup.keys` a claim writes, in [`Layout`] order:
/// name, type, and whether a new key's row gives it a value (the others
/// are NULL, as the SQL insert leaves them to their defaults).
const COLUMNS: [(&str, Oid, bool); 20] = [
    ("source", pg_sys::TEXTOID, true),
    ("idem_key", pg_sys::TEXTOID, true),
    ("state", pg_sys::TEXTOID, true),
    ("attempt", pg_sys::INT4OID, true),
    ("claim_token", pg_sys::UUIDOID, true),
    ("lease_expires_at", pg_sys::TIMESTAMPTZOID, true),
    ("next_attempt_at", pg_sys::TIMESTAMPTZOID, false),
    ("due_at", pg_sys::TIMESTAMPTZOID, true),
    ("fingerprint", pg_sys::BYTEAOID, false),
    ("event_type", pg_sys::TEXTOID, false),
    ("result", pg_sys::JSONBOID, false),
    ("last_step", pg_sys::TEXTOID, false),
    ("last_error", pg_sys::TEXTOID, false),
    ("deliveries", pg_sys::INT4OID, true),
    ("conflicts", pg_sys::INT4OID, true),
    ("first_seen_at", pg_sys::TIMESTAMPTZOID, true),
    ("last_seen_at", pg_sys::TIMESTAMPTZOID, true),
    ("completed_at", pg_sys::TIMESTAMPTZOID, false),
    ("leased_at", pg_sys::TIMESTAMPTZOID, true),
    ("expires_at", pg_sys::TIMESTAMPTZOID, false),
];
const SOURCE: usize = 0;
const IDEM_KEY: usize = 1;

/// Where each of [`COLUMNS`] is in the table (0-based attribute index).
#[derive(Debug, Clone, Copy)]
struct Layout {
    at: [usize; COLUMNS.len()],
}

thread_local! {
    /// The checked layout of the keys table: (relation oid, cache
    /// generation, layout or None when the table is not as needed).
    static LAYOUT: Cell<Option<(u32, u64, Option<Layout>)>> = const { Cell::new(None) };
}

/// The table's layout, if it is the one the extension created.
///
/// # Safety
/// `rel` is an open relation.
unsafe fn check_layout(rel: pg_sys::Relation) -> Option<Layout> {
    // SAFETY: `rel` is open (caller), so its relcache entry and tuple
    // descriptor are valid while we read them.
    unsafe {
        let class = &*(*rel).rd_rel;
        if class.relkind != pg_sys::RELKIND_RELATION as std::ffi::c_char || !(*rel).trigdesc.is_null() {
            return None;
        }
        let desc = (*rel).rd_att;
        let constr = (*desc).constr;
        if !constr.is_null() && ((*constr).num_check > 0 || (*constr).has_generated_stored) {
            return None;
        }
        let desc = PgTupleDesc::from_pg_unchecked(desc);
        let mut at = [usize::MAX; COLUMNS.len()];
        for (i, attr) in desc.iter().enumerate() {
            if attr.attisdropped {
                continue;
            }
            let (c, (_, type_oid, set)) = COLUMNS.iter().enumerate().find(|(_, (name, ..))| *name == attr.name())?;
            if attr.atttypid != *type_oid || at[c] != usize::MAX || attr.attgenerated != 0 {
                return None;
            }
            // A column the row leaves NULL must accept NULL and have no
            // default (the SQL insert would give it the default).
            if !set && (attr.attnotnull || attr.atthasdef) {
                return None;
            }
            at[c] = i;
        }
        at.iter().all(|&i| i != usize::MAX).then_some(Layout { at })
    }
}

/// The layout of `rel` (cached per relation cache generation).
///
/// # Safety
/// `rel` is an open relation.
unsafe fn layout(rel: pg_sys::Relation) -> Option<Layout> {
    // SAFETY: `rel` is open (caller).
    let oid = unsafe { (*rel).rd_id.to_u32() };
    let generation = cache::generation();
    if let Some((cached_oid, cached_generation, layout)) = LAYOUT.get() {
        if cached_oid == oid && cached_generation == generation {
            return layout;
        }
    }
    // SAFETY: as above.
    let layout = unsafe { check_layout(rel) };
    LAYOUT.set(Some((oid, generation, layout)));
    layout
}

/// The oid of `webhook_dedup.keys`, if it exists.
fn keys_oid() -> Option<Oid> {
    // SAFETY: catalog look-ups by name; both return InvalidOid when missing
    // (missing_ok = true for the schema).
    let oid = unsafe {
        let schema = pg_sys::get_namespace_oid(c"webhook_dedup".as_ptr(), true);
        if schema == pg_sys::InvalidOid {
            return None;
        }
        pg_sys::get_relname_relid(c"keys".as_ptr(), schema)
    };
    (oid != pg_sys::InvalidOid).then(|| {
        cache::watch(cache::Table::Keys, oid);
        oid
    })
}

/// Store a new key for the delivery `d`, leased to `d.token`: what
/// `claim_upsert.sql` does when the key is new (see the module's
/// documentation for when it declines). The caller runs under READ
/// COMMITTED or has checked that the key is not one its snapshot cannot
/// see ([`super::visible_conflict`]).
pub fn insert_claim(d: &Delivery<'_>) -> Direct {
    let Some(relid) = keys_oid() else {
        return Direct::Declined;
    };
    // SAFETY: plain catalog checks for the current user.
    let allowed = unsafe {
        let mode = (pg_sys::ACL_INSERT | pg_sys::ACL_SELECT | pg_sys::ACL_UPDATE) as pg_sys::AclMode;
        pg_sys::pg_class_aclcheck(relid, pg_sys::GetUserId(), mode) == pg_sys::AclResult::ACLCHECK_OK
            && pg_sys::check_enable_rls(relid, pg_sys::InvalidOid, false) as u32
                != pg_sys::CheckEnableRlsResult::RLS_ENABLED
    };
    if !allowed {
        return Direct::Declined;
    }
    // SAFETY: the sequence below is ExecInsert's for ON CONFLICT (module
    // documentation), on a relation opened and locked here, with an
    // executor state of our own that is freed before returning; an ERROR
    // anywhere aborts the transaction, whose resource owner releases the
    // relation, index and buffer references and whose memory contexts
    // free the rest, as for any executor node.
    unsafe {
        let rel = pg_sys::table_open(relid, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
        let Some(layout) = layout(rel) else {
            pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
            return Direct::Declined;
        };
        let estate = pg_sys::CreateExecutorState();
        let cid = pg_sys::GetCurrentCommandId(true);
        (*estate).es_output_cid = cid;
        let rri: *mut pg_sys::ResultRelInfo = pg_sys::palloc0(std::mem::size_of::<pg_sys::ResultRelInfo>()).cast();
        pg_sys::InitResultRelInfo(rri, rel, 1, std::ptr::null_mut(), 0);
        #[cfg(feature = "pg13")]
        {
            (*estate).es_result_relation_info = rri;
        }
        pg_sys::ExecOpenIndices(rri, true);
        let finish = |outcome: Direct, slot: *mut pg_sys::TupleTableSlot, arbiters: *mut pg_sys::List| {
            if !slot.is_null() {
                pg_sys::ExecDropSingleTupleTableSlot(slot);
            }
            if !arbiters.is_null() {
                pg_sys::list_free(arbiters);
            }
            pg_sys::ExecCloseIndices(rri);
            pg_sys::FreeExecutorState(estate);
            pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
            outcome
        };
        let Some(pkey) = arbiter(rri, &layout) else {
            return finish(Direct::Declined, std::ptr::null_mut(), std::ptr::null_mut());
        };
        let arbiters = pg_sys::lappend_oid(std::ptr::null_mut(), pkey);
        let slot = pg_sys::table_slot_create(rel, std::ptr::null_mut());
        fill(slot, &layout, d);
        (*slot).tts_tableOid = relid;
        let am = &*(*rel).rd_tableam;
        let (insert, complete) = (
            am.tuple_insert_speculative.expect("a table access method inserts speculatively"),
            am.tuple_complete_speculative.expect("a table access method completes speculative inserts"),
        );
        loop {
            pg_sys::check_for_interrupts!();
            let mut conflict_tid = pg_sys::ItemPointerData::default();
            if !check_index_constraints(rri, slot, estate, &mut conflict_tid, arbiters) {
                return finish(Direct::Known, slot, arbiters);
            }
            let xid = pg_sys::GetCurrentTransactionId();
            let token = pg_sys::SpeculativeInsertionLockAcquire(xid);
            insert(rel, slot, cid, 0, std::ptr::null_mut(), token);
            let mut conflict = false;
            let recheck = insert_index_tuples(rri, slot, estate, &mut conflict, arbiters);
            complete(rel, slot, token, !conflict);
            pg_sys::SpeculativeInsertionLockRelease(xid);
            if !recheck.is_null() {
                pg_sys::list_free(recheck);
            }
            if !conflict {
                break;
            }
            // A concurrent first delivery inserted the key in between: the
            // next probe waits for it and finds it.
        }
        let outcome = finish(Direct::Inserted, slot, arbiters);
        // As after every statement SPI runs: the new row is visible to the
        // next command of this transaction.
        pg_sys::CommandCounterIncrement();
        outcome
    }
}

/// The primary key, if it is on `(idem_key, source)` and every unique index
/// is immediate and none is an exclusion constraint (a deferred check
/// would need an AFTER trigger the executor queues and this module does
/// not).
///
/// # Safety
/// `rri` has its indexes open.
unsafe fn arbiter(rri: *mut pg_sys::ResultRelInfo, layout: &Layout) -> Option<Oid> {
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
            if form.indexrelid == pkey {
                let columns = &info.ii_IndexAttrNumbers[..info.ii_NumIndexKeyAttrs as usize];
                let expected = [layout.at[IDEM_KEY] as i16 + 1, layout.at[SOURCE] as i16 + 1];
                if columns != expected || info.ii_NumIndexAttrs != 2 || !info.ii_Predicate.is_null() {
                    return None;
                }
                found = true;
            }
        }
        found.then_some(pkey)
    }
}

/// The new key's row: what `claim_upsert.sql` inserts.
///
/// # Safety
/// `slot` is an empty slot of the keys table, whose layout is `layout`.
unsafe fn fill(slot: *mut pg_sys::TupleTableSlot, layout: &Layout, d: &Delivery<'_>) {
    let now = timestamptz(d.now);
    let until = timestamptz(d.lease_until);
    let values: [Option<Datum>; COLUMNS.len()] = [
        d.key.source.into_datum(),
        d.key.idem_key.into_datum(),
        "processing".into_datum(),
        1i32.into_datum(),
        d.token.into_datum(),
        until.into_datum(),
        None,
        until.into_datum(),
        d.fingerprint.into_datum(),
        d.event_type.into_datum(),
        None,
        None,
        None,
        1i32.into_datum(),
        0i32.into_datum(),
        now.into_datum(),
        now.into_datum(),
        None,
        now.into_datum(),
        None,
    ];
    // SAFETY: a slot of the table's descriptor has natts entries in
    // tts_values and tts_isnull; the layout maps every column to one of
    // them and leaves no other (dropped ones aside, which stay NULL).
    unsafe {
        pg_sys::ExecClearTuple(slot);
        let natts = (*(*slot).tts_tupleDescriptor).natts as usize;
        for i in 0..natts {
            *(*slot).tts_isnull.add(i) = true;
            *(*slot).tts_values.add(i) = Datum::from(0);
        }
        for (c, value) in values.iter().enumerate() {
            if let Some(value) = value {
                *(*slot).tts_values.add(layout.at[c]) = *value;
                *(*slot).tts_isnull.add(layout.at[c]) = false;
            }
        }
        pg_sys::ExecStoreVirtualTuple(slot);
    }
}

/// `ExecCheckIndexConstraints`, whose arguments changed in PostgreSQL 14
/// (the result relation) and 18 (the TID of a tuple being updated).
///
/// # Safety
/// As `ExecCheckIndexConstraints`.
unsafe fn check_index_constraints(
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
unsafe fn insert_index_tuples(
    rri: *mut pg_sys::ResultRelInfo,
    slot: *mut pg_sys::TupleTableSlot,
    estate: *mut pg_sys::EState,
    conflict: *mut bool,
    arbiters: *mut pg_sys::List,
) -> *mut pg_sys::List {
    // SAFETY: forwarded (caller).
    unsafe {
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
