//! Claims and completions without an SQL plan.
//!
//! A claim and its completion are what a receiver does most, and through
//! SPI each costs more in executor start-up (opening the table and its
//! indexes, building the projections of `INSERT ... ON CONFLICT DO UPDATE
//! ... RETURNING` or `UPDATE ... RETURNING`) than in the work itself. This
//! module does the same work with the executor's own routines and nothing
//! else, in the order the executor uses (PostgreSQL's `nodeModifyTable.c`):
//!
//! - **a new key** ([`Session::insert_claim`]) as `ExecInsert` does for
//!   `ON CONFLICT`: `ExecCheckIndexConstraints` probes the primary key, the
//!   arbiter, waiting for a transaction that is inserting or changing the
//!   same key; if there is none the row is inserted speculatively
//!   (`tuple_insert_speculative` under a `SpeculativeInsertionLockAcquire`
//!   token), then its index entries (`ExecInsertIndexTuples`, which tells of
//!   a conflict that arose in between), then the insertion is confirmed or
//!   killed (`tuple_complete_speculative`); a conflict starts over;
//! - **a known key** as `ExecOnConflictUpdate` and `ExecUpdate` do: the row
//!   the probe found ([`Session::locate`] for a completion) is locked
//!   (`tuple_lock`, waiting for its writers; under READ COMMITTED the
//!   newest version of the row, under REPEATABLE READ a row changed after
//!   the snapshot is 40001, as is one the snapshot cannot see), the caller
//!   decides on what it read, and the new version is written
//!   (`tuple_update`, then `ExecInsertIndexTuples` unless the update was
//!   HOT). A row deleted meanwhile ([`Locked::Gone`]) sends the caller back
//!   to the probe.
//!
//! The arbitration and the row locks are PostgreSQL's own, those of the SQL
//! statements. What the statements would do besides is checked instead, and
//! when any of it applies [`Session::open`] declines and the caller runs the
//! statements (`claim_upsert.sql`, `key_complete.sql`):
//!
//! - the table must be exactly the one the extension created: a plain heap
//!   table (not a partition, not a Citus table, whose rows are in shards
//!   that Citus routes to), the same columns and types without type
//!   modifiers, the key columns in collation "C", NOT NULL only
//!   where the extension declares it, no default on the columns a new key
//!   leaves NULL, no CHECK constraint or generated column, no trigger or
//!   rule, every unique index immediate and no exclusion constraint, the
//!   primary key on `(idem_key, source)` and no other unique index that
//!   `ON CONFLICT (idem_key, source)` would infer as an arbiter; checked
//!   once per relation cache generation ([`crate::relcache`]);
//! - the caller must hold all of INSERT, SELECT and UPDATE on it and USAGE
//!   on its schema (a caller with column privileges only goes through SQL,
//!   which checks them), and row-level security must not apply to it;
//!   checked on every call;
//! - the transaction must be able to write (not read-only, not on a
//!   standby, not in parallel mode: the statements raise 25006 and the
//!   like) and not SERIALIZABLE (a completion decides on a row it reads,
//!   and only the executor's scans take the predicate locks that
//!   serializable isolation needs).
//!
//! What the executor does around the write, this module does too: a
//! command counter increment before it takes its command id (as SPI does
//! before each statement, so a row written earlier in the calling
//! statement is visible), `CheckCmdReplicaIdentity` before an update (a
//! publication that publishes updates of a table without a usable replica
//! identity refuses it, 55000), the index-unchanged hint for the indexes
//! whose columns an update leaves as they were (bottom-up deletion), and
//! for a completion the check of the token on the version of the row the
//! statement's snapshot sees before any lock is taken (a stale token takes
//! no lock, as the UPDATE's qualification takes none). Each of these was a
//! difference to the SQL found by review; `tests/cluster/
//! test_direct_writes.py` runs the same calls both ways and compares.
//!
//! `webhook_dedup.direct_writes = off` sends everything through SQL.

use super::claim::Delivery;
use super::{Key, KeyRow};
use crate::claim::State;
use crate::jsonb::Jsonb;
use crate::time::timestamptz;
use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::{FromDatum, IntoDatum, PgTupleDesc, Uuid};

/// The columns of `webhook_dedup.keys`, in [`Col`] order: name, type,
/// whether a new key's row gives it a value (the others are NULL, as the
/// SQL insert leaves them to their defaults), and whether the extension's
/// schema declares it NOT NULL (the others are written NULL by some
/// transition, so a NOT NULL added to them would need the check the
/// executor makes and this module does not).
const COLUMNS: [(&str, Oid, bool, bool); 25] = [
    ("source", pg_sys::TEXTOID, true, true),
    ("idem_key", pg_sys::TEXTOID, true, true),
    ("state", pg_sys::TEXTOID, true, true),
    ("attempt", pg_sys::INT4OID, true, true),
    ("claim_token", pg_sys::UUIDOID, true, false),
    ("lease_expires_at", pg_sys::TIMESTAMPTZOID, true, false),
    ("next_attempt_at", pg_sys::TIMESTAMPTZOID, false, false),
    ("due_at", pg_sys::TIMESTAMPTZOID, true, false),
    ("fingerprint", pg_sys::BYTEAOID, false, false),
    ("event_type", pg_sys::TEXTOID, false, false),
    ("result", pg_sys::JSONBOID, false, false),
    ("last_step", pg_sys::TEXTOID, false, false),
    ("last_error", pg_sys::TEXTOID, false, false),
    ("deliveries", pg_sys::INT4OID, true, true),
    ("conflicts", pg_sys::INT4OID, true, true),
    ("first_seen_at", pg_sys::TIMESTAMPTZOID, true, true),
    ("last_seen_at", pg_sys::TIMESTAMPTZOID, true, true),
    ("completed_at", pg_sys::TIMESTAMPTZOID, false, false),
    ("leased_at", pg_sys::TIMESTAMPTZOID, true, false),
    ("expires_at", pg_sys::TIMESTAMPTZOID, false, false),
    ("redacted_at", pg_sys::TIMESTAMPTZOID, false, false),
    ("redacted_by", pg_sys::TEXTOID, false, false),
    ("redriven_at", pg_sys::TIMESTAMPTZOID, false, false),
    ("redrive_run", pg_sys::INT8OID, false, false),
    ("reconciled_at", pg_sys::TIMESTAMPTZOID, false, false),
];

/// A column of `webhook_dedup.keys` (an index into [`COLUMNS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    Source,
    IdemKey,
    State,
    Attempt,
    ClaimToken,
    LeaseExpiresAt,
    NextAttemptAt,
    DueAt,
    Fingerprint,
    EventType,
    Result,
    LastStep,
    LastError,
    Deliveries,
    Conflicts,
    FirstSeenAt,
    LastSeenAt,
    CompletedAt,
    LeasedAt,
    ExpiresAt,
    RedactedAt,
    RedactedBy,
    RedrivenAt,
    RedriveRun,
    ReconciledAt,
}

/// Where each of [`COLUMNS`] is in the table (0-based attribute index).
#[derive(Debug, Clone, Copy)]
struct Layout {
    at: [usize; COLUMNS.len()],
}

/// How many relations' layouts a backend keeps: the keys table, or on a
/// Citus node the shards of it that the node holds (32 by default across
/// the workers).
const LAYOUTS_KEPT: usize = 64;

/// The checked layouts of the keys table or its shards: the relation cache
/// generation they were checked in, and (relation oid, layout or None when
/// the table is not as needed).
type Layouts = (u64, Vec<(u32, Option<Layout>)>);

thread_local! {
    static LAYOUTS: std::cell::RefCell<Layouts> = const { std::cell::RefCell::new((0, Vec::new())) };
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
        // A plain heap table, not a partition (its partition constraint),
        // without triggers or rules (the statements would fire or apply
        // them).
        if class.relkind != pg_sys::RELKIND_RELATION as std::ffi::c_char
            || class.relispartition
            || class.relam != pg_sys::HEAP_TABLE_AM_OID
            || !(*rel).trigdesc.is_null()
            || !(*rel).rd_rules.is_null()
            || crate::citus::is_citus_table((*rel).rd_id)
        {
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
            let (c, (_, type_oid, set, not_null)) =
                COLUMNS.iter().enumerate().find(|(_, (name, ..))| *name == attr.name())?;
            // The exact type, without a type modifier (a timestamptz(0)
            // would round what the SQL writes and this module would not).
            if attr.atttypid != *type_oid || attr.atttypmod != -1 || at[c] != usize::MAX || attr.attgenerated != 0 {
                return None;
            }
            // The key columns compare byte for byte, as their primary key
            // and the rows this module locks do ("C", the extension's own
            // collation): under a nondeterministic collation the index
            // would call 'ABC' and 'abc' one key while the row read back
            // has the other.
            if (c == Col::Source as usize || c == Col::IdemKey as usize) && attr.attcollation != pg_sys::C_COLLATION_OID
            {
                return None;
            }
            // NOT NULL only where the extension declares it (nothing here
            // writes NULL there), and no default on a column a new key
            // leaves NULL (the SQL insert would give it the default).
            if (attr.attnotnull && !not_null) || (!set && attr.atthasdef) {
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
    let generation = crate::relcache::generation();
    let cached = LAYOUTS.with_borrow_mut(|(at, layouts)| {
        if *at != generation {
            *at = generation;
            layouts.clear();
        }
        layouts.iter().find(|(cached, _)| *cached == oid).map(|(_, layout)| *layout)
    });
    if let Some(layout) = cached {
        return layout;
    }
    // SAFETY: as above.
    let layout = unsafe { check_layout(rel) };
    LAYOUTS.with_borrow_mut(|(at, layouts)| {
        if *at == generation {
            if layouts.len() >= LAYOUTS_KEPT {
                layouts.clear();
            }
            layouts.push((oid, layout));
        }
    });
    layout
}

/// Whether this transaction may write here without SQL's own checks: not
/// read-only (`SET TRANSACTION READ ONLY`, `default_transaction_read_only`,
/// a standby), not in parallel mode, and not SERIALIZABLE (a completion
/// reads the row it decides on, and only the executor's scans take the
/// predicate locks serializable isolation needs), and
/// `ignore_system_indexes` off. Otherwise the statements run, and raise
/// what they raise (25006 in a read-only transaction).
fn writable_here() -> bool {
    // SAFETY: backend globals and plain status functions.
    unsafe {
        // (ignore_system_indexes, which any login may set when it connects,
        // would turn a completion's look-up through the primary key,
        // systable_beginscan's, into a scan of the whole table)
        !pg_sys::IgnoreSystemIndexes
            && !pg_sys::XactReadOnly
            && !pg_sys::IsInParallelMode()
            && !pg_sys::RecoveryInProgress()
            && pg_sys::XactIsoLevel != pg_sys::XACT_SERIALIZABLE as i32
    }
}

/// Whether `user` has USAGE on `schema`.
///
/// # Safety
/// A plain catalog check; `schema` is an existing namespace.
unsafe fn schema_usage(schema: Oid, user: Oid) -> bool {
    let usage = pg_sys::ACL_USAGE as pg_sys::AclMode;
    // SAFETY: per the contract.
    unsafe {
        #[cfg(any(feature = "pg13", feature = "pg14", feature = "pg15"))]
        let result = pg_sys::pg_namespace_aclcheck(schema, user, usage);
        #[cfg(not(any(feature = "pg13", feature = "pg14", feature = "pg15")))]
        let result = pg_sys::object_aclcheck(pg_sys::NamespaceRelationId, schema, user, usage);
        result == pg_sys::AclResult::ACLCHECK_OK
    }
}

/// A row of the keys table as datums, by [`Col`]. By-reference datums
/// point into the locked row's buffer (pinned by the session's slot) or
/// into memory of the call.
#[derive(Debug, Clone, Copy)]
pub struct Values {
    values: [Datum; COLUMNS.len()],
    nulls: [bool; COLUMNS.len()],
    /// The columns [`Values::set`] wrote, bit `Col as usize`: what the SET
    /// list of the equivalent UPDATE names (`ExecGetUpdatedCols`), for the
    /// index-unchanged hint of an update.
    set: u32,
}

impl Values {
    fn empty() -> Values {
        Values { values: [Datum::from(0); COLUMNS.len()], nulls: [true; COLUMNS.len()], set: 0 }
    }

    /// Set a column to a value (None: NULL).
    pub fn set(&mut self, col: Col, value: Option<Datum>) {
        self.values[col as usize] = value.unwrap_or(Datum::from(0));
        self.nulls[col as usize] = value.is_none();
        self.set |= 1 << (col as usize);
    }

    fn get<T: FromDatum>(&self, col: Col) -> Option<T> {
        let c = col as usize;
        // SAFETY: the datum is of the column's type (COLUMNS, checked
        // against the table), valid while the session's slot holds the row.
        unsafe { T::from_datum(self.values[c], self.nulls[c]) }
    }

    fn timestamp(&self, col: Col) -> Option<i64> {
        self.get::<TimestampWithTimeZone>(col).map(pg_sys::TimestampTz::from)
    }

    /// The row as [`KeyRow`], its by-reference values copied: into Rust
    /// values, and `result` into the memory context that was current when
    /// the SPI connection was made (`SPI_datumTransfer`, as
    /// [`crate::spi::Rows::get_jsonb`] does), so that it outlives the
    /// connection (whose own context `SPI_finish` deletes). Call it while
    /// connected to SPI.
    pub fn key_row(&self) -> KeyRow {
        let state: String = self.get(Col::State).expect("state is NOT NULL");
        let result = (!self.nulls[Col::Result as usize]).then(|| {
            // SAFETY: a jsonb datum (see `get`); pg_detoast_datum_packed
            // returns it or a detoasted copy, and SPI_datumTransfer copies
            // that varlena (by reference, typLen -1) into the context the
            // caller of the SPI connection allocates in (it raises when not
            // connected).
            unsafe {
                let detoasted = pg_sys::pg_detoast_datum_packed(self.values[Col::Result as usize].cast_mut_ptr());
                Jsonb::from_raw(pg_sys::SPI_datumTransfer(Datum::from(detoasted), false, -1))
            }
        });
        KeyRow {
            source: self.get(Col::Source).expect("source is NOT NULL"),
            idem_key: self.get(Col::IdemKey).expect("idem_key is NOT NULL"),
            state: State::parse(&state)
                .unwrap_or_else(|| pgrx::error!("webhook_dedup: unknown stored state {state:?}")),
            attempt: self.get(Col::Attempt).expect("attempt is NOT NULL"),
            claim_token: self.get::<Uuid>(Col::ClaimToken),
            lease_expires_at: self.timestamp(Col::LeaseExpiresAt),
            next_attempt_at: self.timestamp(Col::NextAttemptAt),
            fingerprint: self.get(Col::Fingerprint),
            event_type: self.get(Col::EventType),
            result,
            last_step: self.get(Col::LastStep),
            first_seen_at: self.timestamp(Col::FirstSeenAt).expect("first_seen_at is NOT NULL"),
            due_at: self.timestamp(Col::DueAt),
        }
    }

    /// `deliveries`, `conflicts` (NOT NULL integers).
    pub fn count(&self, col: Col) -> i32 {
        self.get(col).unwrap_or(0)
    }

    pub fn is_null(&self, col: Col) -> bool {
        self.nulls[col as usize]
    }

    /// Whether `token` holds the row's lease (as [`KeyRow::held_by`],
    /// without copying the row).
    pub fn held_by(&self, token: &Uuid) -> bool {
        let state: Option<String> = self.get(Col::State);
        let held = self.get::<Uuid>(Col::ClaimToken);
        let state = state.as_deref().and_then(State::parse).unwrap_or(State::Pending);
        crate::claim::holds_lease(state, held.as_ref().map(|t| t.as_bytes().as_slice()), token.as_bytes())
    }

    pub fn event_type(&self) -> Option<String> {
        self.get(Col::EventType)
    }
}

/// What [`Session::insert_claim`] did.
#[derive(Debug, Clone, Copy)]
pub enum Insert {
    /// The key was new: stored, leased to the delivery's token.
    Inserted,
    /// The key exists; the TID of its row when the probe found it.
    Known(pg_sys::ItemPointerData),
}

/// What [`Session::lock`] found. (Returned once per claim, on the stack:
/// no box for the row's values.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Locked {
    /// The row, locked until the transaction ends; its values, and the
    /// TID of the version locked (the one to update).
    Row(Values, pg_sys::ItemPointerData),
    /// The row was deleted meanwhile, or its newest version has another
    /// key: probe again.
    Gone,
}

/// A key's row as [`Session::look`] found it.
#[derive(Debug, Clone)]
pub struct Looked {
    /// What the state machine decides on.
    pub stored: crate::claim::Stored,
    /// The version was written by the current transaction (it holds the
    /// row's lock: waiting for its holder would wait for itself).
    pub ours: bool,
}

/// The keys table opened for direct writes, with what the executor's
/// routines need. Closed by [`Session::close`]; after an ERROR the aborting
/// transaction releases what it holds, as for any executor state.
pub struct Session {
    relid: Oid,
    rel: pg_sys::Relation,
    estate: *mut pg_sys::EState,
    rri: *mut pg_sys::ResultRelInfo,
    layout: Layout,
    arbiters: *mut pg_sys::List,
    cid: pg_sys::CommandId,
    /// For the rows this session writes.
    slot: *mut pg_sys::TupleTableSlot,
    /// For the row it locks (holds its buffer pin until cleared); made on
    /// first use (a new key needs none).
    locked: *mut pg_sys::TupleTableSlot,
    wrote: bool,
    /// Opened by [`Session::open_to_look`]: only the primary key is open,
    /// so nothing may be written.
    look_only: bool,
}

impl Session {
    /// Open the keys table for direct writes of `source`'s keys, or None
    /// (declined: use SQL; see the module documentation for when).
    /// Distributed on Citus, the table written is the source's shard when
    /// it is on this node, its locks taken as Citus's executor takes them
    /// for a write ([`super::local_shard::lock`]).
    pub fn open(conn: &crate::spi::Conn<'_>, source: &str) -> Option<Session> {
        Session::open_for(conn, source, true)
    }

    /// [`Session::open`] for [`Session::look`] alone: distributed on Citus,
    /// the shard is opened without the metadata lock Citus takes for writes
    /// ([`super::local_shard::readable`]), which the bounded wait would
    /// otherwise hold while it sleeps.
    pub fn open_to_look(conn: &crate::spi::Conn<'_>, source: &str) -> Option<Session> {
        Session::open_for(conn, source, false)
    }

    fn open_for(conn: &crate::spi::Conn<'_>, source: &str, write: bool) -> Option<Session> {
        if !crate::guc::direct_writes() || !writable_here() {
            return None;
        }
        let (schema, keys) = crate::relcache::keys_oid()?;
        // SAFETY: plain catalog checks for the current user.
        let allowed = unsafe {
            let user = pg_sys::GetUserId();
            let mode = (pg_sys::ACL_INSERT | pg_sys::ACL_SELECT | pg_sys::ACL_UPDATE) as pg_sys::AclMode;
            // Every one of the three (ACLMASK_ALL; pg_class_aclcheck would
            // accept any one of them), and USAGE on the schema, which the
            // statements' name look-up needs.
            pg_sys::pg_class_aclmask(keys, user, mode, pg_sys::AclMaskHow::ACLMASK_ALL) == mode
                && schema_usage(schema, user)
                && pg_sys::check_enable_rls(keys, pg_sys::InvalidOid, false) as u32
                    != pg_sys::CheckEnableRlsResult::RLS_ENABLED
        };
        if !allowed {
            return None;
        }
        // Privileges and row-level security are those of the table the
        // statements name (a shard has the same grants, which Citus
        // propagates); the rows go where the statements' would.
        let relid = match crate::citus::keys_distributed() {
            false => keys,
            true if write => super::local_shard::lock(conn, keys, source)?.keys,
            true => super::local_shard::readable(conn, keys, source)?,
        };
        // SAFETY: a relation opened and locked here, with an executor state
        // of our own, as ExecInitModifyTable builds one for a result
        // relation (InitResultRelInfo, ExecOpenIndices with speculative
        // insertion info); every path out of this block either returns the
        // session or closes what it opened.
        unsafe {
            let rel = pg_sys::table_open(relid, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
            let Some(layout) = layout(rel) else {
                pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
                return None;
            };
            let estate = pg_sys::CreateExecutorState();
            // As SPI before each statement: what the calling statement (or
            // an SPI statement just before) wrote becomes visible to this
            // command; without it, a row written under the current command
            // id would lock as invisible (TM_Invisible). Nothing is done
            // when the command id was not used.
            pg_sys::CommandCounterIncrement();
            let cid = pg_sys::GetCurrentCommandId(true);
            (*estate).es_output_cid = cid;
            let rri: *mut pg_sys::ResultRelInfo = pg_sys::palloc0(std::mem::size_of::<pg_sys::ResultRelInfo>()).cast();
            // Range table index 0: no range table; nothing this module calls
            // reads one (ExecInsertIndexTuples is told every write is an
            // insert, see `update`).
            pg_sys::InitResultRelInfo(rri, rel, 0, std::ptr::null_mut(), 0);
            #[cfg(feature = "pg13")]
            {
                (*estate).es_result_relation_info = rri;
            }
            // A session that only looks opens the primary key alone (the
            // probe's and the look-up's index): the other indexes are for
            // writes (opening them was a tenth of a read).
            if write {
                pg_sys::ExecOpenIndices(rri, true);
            } else {
                open_primary_key(rri);
            }
            let Some(pkey) = arbiter(rri, &layout) else {
                pg_sys::ExecCloseIndices(rri);
                pg_sys::FreeExecutorState(estate);
                pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
                return None;
            };
            Some(Session {
                relid,
                rel,
                estate,
                rri,
                layout,
                arbiters: pg_sys::lappend_oid(std::ptr::null_mut(), pkey),
                cid,
                slot: pg_sys::table_slot_create(rel, std::ptr::null_mut()),
                locked: std::ptr::null_mut(),
                wrote: false,
                look_only: !write,
            })
        }
    }

    /// Close the table and free the executor state. After a write, the
    /// command counter advances, as after every statement SPI runs, so the
    /// next command of the transaction sees it.
    pub fn close(self) {
        // SAFETY: everything was opened by `open` and is released once.
        unsafe {
            if !self.locked.is_null() {
                pg_sys::ExecDropSingleTupleTableSlot(self.locked);
            }
            pg_sys::ExecDropSingleTupleTableSlot(self.slot);
            pg_sys::list_free(self.arbiters);
            pg_sys::ExecCloseIndices(self.rri);
            pg_sys::FreeExecutorState(self.estate);
            pg_sys::table_close(self.rel, pg_sys::NoLock as pg_sys::LOCKMODE);
            if self.wrote {
                pg_sys::CommandCounterIncrement();
            }
        }
    }

    /// Store `values` in the session's write slot (all other attributes
    /// NULL: a table of our layout has none but dropped ones).
    ///
    /// # Safety
    /// `values` hold datums of the columns' types, valid until the row is
    /// written.
    unsafe fn fill(&self, values: &Values) {
        // SAFETY: the slot has the table's descriptor: natts entries in
        // tts_values and tts_isnull; the layout maps each column into them.
        unsafe {
            let slot = self.slot;
            pg_sys::ExecClearTuple(slot);
            let natts = (*(*slot).tts_tupleDescriptor).natts as usize;
            for i in 0..natts {
                *(*slot).tts_isnull.add(i) = true;
                *(*slot).tts_values.add(i) = Datum::from(0);
            }
            for c in 0..COLUMNS.len() {
                *(*slot).tts_values.add(self.layout.at[c]) = values.values[c];
                *(*slot).tts_isnull.add(self.layout.at[c]) = values.nulls[c];
            }
            pg_sys::ExecStoreVirtualTuple(slot);
            (*slot).tts_tableOid = self.relid;
        }
    }

    /// Probe the primary key for the key in the write slot: true when it is
    /// free; false (and its row's TID) when a live row has it. Waits for a
    /// transaction inserting, updating or deleting such a row.
    fn probe(&self, tid: &mut pg_sys::ItemPointerData) -> bool {
        pg_sys::check_for_interrupts!();
        // SAFETY: as ExecCheckIndexConstraints, on the session's state.
        unsafe { check_index_constraints(self.rri, self.slot, self.estate, tid, self.arbiters) }
    }

    /// Store a new key for the delivery `d`, leased to `d.token`: what
    /// `claim_upsert.sql` does when the key is new. The caller runs under
    /// READ COMMITTED or has checked that the key is not one its snapshot
    /// cannot see ([`super::visible_conflict`]).
    pub fn insert_claim(&mut self, d: &Delivery<'_>) -> Insert {
        assert!(!self.look_only, "webhook_dedup: a session opened to look does not write");
        let now = timestamptz(d.now);
        let until = timestamptz(d.lease_until);
        let mut v = Values::empty();
        v.set(Col::Source, d.key.source.into_datum());
        v.set(Col::IdemKey, d.key.idem_key.into_datum());
        v.set(Col::State, State::Processing.as_str().into_datum());
        v.set(Col::Attempt, 1i32.into_datum());
        v.set(Col::ClaimToken, d.token.into_datum());
        v.set(Col::LeaseExpiresAt, until.into_datum());
        v.set(Col::DueAt, until.into_datum());
        v.set(Col::Fingerprint, d.fingerprint.into_datum());
        v.set(Col::EventType, d.event_type.into_datum());
        v.set(Col::Deliveries, 1i32.into_datum());
        v.set(Col::Conflicts, 0i32.into_datum());
        v.set(Col::FirstSeenAt, now.into_datum());
        v.set(Col::LastSeenAt, now.into_datum());
        v.set(Col::LeasedAt, now.into_datum());
        // SAFETY: datums of the columns' types, in memory of the call.
        unsafe { self.fill(&v) };
        // SAFETY: ExecInsert's speculative insertion (module documentation).
        unsafe {
            let am = &*(*self.rel).rd_tableam;
            let insert = am.tuple_insert_speculative.expect("a table access method inserts speculatively");
            let complete = am.tuple_complete_speculative.expect("a table access method completes speculative inserts");
            loop {
                let mut conflict_tid = pg_sys::ItemPointerData::default();
                if !self.probe(&mut conflict_tid) {
                    return Insert::Known(conflict_tid);
                }
                let xid = pg_sys::GetCurrentTransactionId();
                let token = pg_sys::SpeculativeInsertionLockAcquire(xid);
                insert(self.rel, self.slot, self.cid, 0, std::ptr::null_mut(), token);
                let mut conflict = false;
                let recheck = insert_index_tuples(self.rri, self.slot, self.estate, Some(&mut conflict), self.arbiters);
                complete(self.rel, self.slot, token, !conflict);
                pg_sys::SpeculativeInsertionLockRelease(xid);
                if !recheck.is_null() {
                    pg_sys::list_free(recheck);
                }
                self.wrote = true;
                if !conflict {
                    return Insert::Inserted;
                }
                // A concurrent first delivery inserted the key in between:
                // the next probe waits for it and finds it.
            }
        }
    }

    /// The TID of the key's live row (waiting for a transaction writing
    /// it), or None when there is no such key.
    pub fn locate(&mut self, key: Key<'_>) -> Option<pg_sys::ItemPointerData> {
        let mut v = Values::empty();
        v.set(Col::Source, key.source.into_datum());
        v.set(Col::IdemKey, key.idem_key.into_datum());
        // SAFETY: datums of the key columns; the probe reads only those
        // (the primary key's), the row is never written.
        unsafe { self.fill(&v) };
        let mut tid = pg_sys::ItemPointerData::default();
        (!self.probe(&mut tid)).then_some(tid)
    }

    /// Whether the version of `key`'s row that the completion's UPDATE
    /// would see is held by `token`: found through the primary key with
    /// the UPDATE's snapshot (under READ COMMITTED a new one per statement,
    /// which SPI takes: the latest; otherwise the transaction's). A
    /// completion locks the row only then:
    /// the UPDATE's qualification (`claim_token = $token AND state =
    /// 'processing'`) takes no lock on a row that does not match, so a
    /// stale token must not block the key's real holder, nor meet a
    /// concurrent change (40001 under REPEATABLE READ) where the SQL
    /// matches nothing.
    pub fn visible_holder(&mut self, key: Key<'_>, token: &Uuid) -> bool {
        let snapshot_per_transaction = super::transaction_snapshot();
        self.scan_key(key, !snapshot_per_transaction, |attr, _| {
            let (state, state_null) = attr(Col::State);
            let (held_token, token_null) = attr(Col::ClaimToken);
            // SAFETY: datums of the row the scan returned, read while its
            // buffer is pinned (inside the scan).
            let (state, held_token) =
                unsafe { (String::from_datum(state, state_null), Uuid::from_datum(held_token, token_null)) };
            state.as_deref().and_then(State::parse).is_some_and(|state| {
                crate::claim::holds_lease(state, held_token.as_ref().map(|t| t.as_bytes().as_slice()), token.as_bytes())
            })
        })
        .unwrap_or(false)
    }

    /// `key`'s row as the latest snapshot sees it, read without a lock and
    /// without waiting for its writers: what the bounded wait for an
    /// in-flight duplicate decides on ([`crate::wait`]), in any isolation
    /// level (the claim that follows makes the isolation level's own
    /// checks). `None` when there is no such row.
    pub fn look(&mut self, key: Key<'_>) -> Option<Looked> {
        self.scan_key(key, true, |attr, ours| {
            let text = |col| {
                let (datum, null) = attr(col);
                // SAFETY: as in visible_holder.
                unsafe { String::from_datum(datum, null) }
            };
            let time = |col| {
                let (datum, null) = attr(col);
                // SAFETY: as in visible_holder.
                unsafe { TimestampWithTimeZone::from_datum(datum, null) }.map(pg_sys::TimestampTz::from)
            };
            let (attempt, attempt_null) = attr(Col::Attempt);
            let (fingerprint, fingerprint_null) = attr(Col::Fingerprint);
            let state_text = text(Col::State).unwrap_or_default();
            let state = State::parse(&state_text)
                .unwrap_or_else(|| pgrx::error!("webhook_dedup: unknown stored state {state_text:?}"));
            Looked {
                stored: crate::claim::Stored {
                    state,
                    // SAFETY: as in visible_holder.
                    attempt: unsafe { i32::from_datum(attempt, attempt_null) }.unwrap_or(0),
                    lease_expires_at: time(Col::LeaseExpiresAt),
                    next_attempt_at: time(Col::NextAttemptAt),
                    // SAFETY: as in visible_holder (bytea, copied out).
                    fingerprint: unsafe { Vec::<u8>::from_datum(fingerprint, fingerprint_null) },
                },
                ours,
            }
        })
    }

    /// `key`'s row as the latest snapshot sees it, copied ([`Values::key_row`]),
    /// with its `last_seen_at`: read without a lock and without waiting for
    /// its writers, for a duplicate answered without a write
    /// (`crate::engine::claim`). `None` when no version is visible,
    /// or when this transaction wrote the visible one (the caller then
    /// takes the row's lock, as for any other delivery). Call it while
    /// connected to SPI (the copy of `result` goes to the caller's context).
    pub fn read_row(&mut self, key: Key<'_>) -> Option<(KeyRow, i64)> {
        self.scan_key(key, true, copy_unless_ours).flatten()
    }

    /// [`Session::read_row`] where the probe found the key at `tid`
    /// ([`Insert::Known`], [`Session::locate`]): the version at that TID
    /// fetched with the latest snapshot, without a second descent of the
    /// primary key (the descent was a fifth of a duplicate's
    /// CPU). When that version is no longer visible (changed or deleted
    /// and committed since the probe) or no longer has `key` (a TID is
    /// reused only after the row was removed), the primary key is read as
    /// [`Session::read_row`] reads it.
    pub fn read_row_at(&mut self, key: Key<'_>, tid: pg_sys::ItemPointerData) -> Option<(KeyRow, i64)> {
        let mut tid = tid;
        // SAFETY: a fetch of one TID of the session's open relation into
        // its lock slot (as heapam_fetch_row_version: a visibility check
        // under the registered snapshot, the buffer pinned by the slot);
        // the datums are read while the slot holds the tuple and copied
        // out before it is cleared.
        let fetched = unsafe {
            if self.locked.is_null() {
                self.locked = pg_sys::table_slot_create(self.rel, std::ptr::null_mut());
            }
            let slot = self.locked;
            pg_sys::ExecClearTuple(slot);
            let snapshot = pg_sys::RegisterSnapshot(pg_sys::GetLatestSnapshot());
            let visible = pg_sys::table_tuple_fetch_row_version(self.rel, &mut tid, snapshot, slot);
            pg_sys::UnregisterSnapshot(snapshot);
            let read = visible.then(|| {
                pg_sys::slot_getallattrs(slot);
                let attr = |col: Col| {
                    let at = self.layout.at[col as usize];
                    (*(*slot).tts_values.add(at), *(*slot).tts_isnull.add(at))
                };
                let same = |col: Col, want: &str| {
                    let (datum, null) = attr(col);
                    !null && <&str>::from_datum(datum, false) == Some(want)
                };
                (same(Col::Source, key.source) && same(Col::IdemKey, key.idem_key)).then(|| {
                    let tuple = pg_sys::ExecFetchSlotHeapTuple(slot, false, std::ptr::null_mut());
                    copy_unless_ours(&attr, written_here(tuple))
                })
            });
            pg_sys::ExecClearTuple(slot);
            read
        };
        match fetched {
            Some(Some(row)) => row,
            _ => self.read_row(key),
        }
    }

    /// Find `key`'s row through the primary key with the latest snapshot
    /// (`latest`) or the transaction's, and read it with `read` while the
    /// scan holds it: `read` gets the column accessor and whether this
    /// transaction wrote that version. `None` when no row is visible.
    fn scan_key<T>(
        &mut self,
        key: Key<'_>,
        latest: bool,
        read: impl FnOnce(&dyn Fn(Col) -> (Datum, bool), bool) -> T,
    ) -> Option<T> {
        let pkey = self.arbiter_oid();
        // SAFETY: snapshot functions of a backend in a transaction; the
        // snapshot is registered (copied) for the scan and released after it
        // (an ERROR in between releases it with the resource owner).
        let snapshot = unsafe {
            pg_sys::RegisterSnapshot(if latest {
                pg_sys::GetLatestSnapshot()
            } else {
                pg_sys::GetTransactionSnapshot()
            })
        };
        // SAFETY: a scan of the session's open relation through its primary
        // key (opened and closed by systable_*), with scan keys on the key
        // columns' heap attribute numbers (systable_beginscan maps them to
        // the index's); text equality in collation "C" (ScanKeyInit's, and
        // the columns', checked by the layout); the datums outlive the scan;
        // the tuple's datums are read only inside `read`, while the scan
        // holds its buffer.
        unsafe {
            let source = key.source.into_datum().expect("text");
            let idem_key = key.idem_key.into_datum().expect("text");
            let mut keys: [pg_sys::ScanKeyData; 2] = std::mem::zeroed();
            for (k, (col, value)) in keys.iter_mut().zip([(Col::IdemKey, idem_key), (Col::Source, source)]) {
                pg_sys::ScanKeyInit(
                    k,
                    self.layout.at[col as usize] as pg_sys::AttrNumber + 1,
                    pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
                    pg_sys::F_TEXTEQ.into(),
                    value,
                );
            }
            let scan = pg_sys::systable_beginscan(self.rel, pkey, true, snapshot, 2, keys.as_mut_ptr());
            let tuple = pg_sys::systable_getnext(scan);
            let found = (!tuple.is_null()).then(|| {
                let desc = (*self.rel).rd_att;
                let attr = |col: Col| {
                    let mut is_null = false;
                    let datum =
                        pg_sys::heap_getattr(tuple, self.layout.at[col as usize] as i32 + 1, desc, &mut is_null);
                    (datum, is_null)
                };
                read(&attr, written_here(tuple))
            });
            pg_sys::systable_endscan(scan);
            pg_sys::UnregisterSnapshot(snapshot);
            found
        }
    }

    /// The primary key's oid (the one arbiter, [`arbiter`]).
    fn arbiter_oid(&self) -> Oid {
        // SAFETY: a one-element list made by `open`.
        unsafe { pg_sys::list_nth_oid(self.arbiters, 0) }
    }

    /// Lock the row of `key` at `tid` (where the probe found it) for this
    /// transaction and read it. Under READ COMMITTED the newest version of
    /// the row is locked, and when that version no longer has `key` (an
    /// operator changed the key meanwhile) it is [`Locked::Gone`], as the
    /// statements' re-check of their condition would find; under
    /// REPEATABLE READ and SERIALIZABLE a row changed after the
    /// transaction's snapshot, or one the snapshot cannot see, is 40001.
    pub fn lock(&mut self, key: Key<'_>, tid: pg_sys::ItemPointerData) -> Locked {
        let snapshot_per_transaction = super::transaction_snapshot();
        let flags = if snapshot_per_transaction { 0 } else { pg_sys::TUPLE_LOCK_FLAG_FIND_LAST_VERSION as u8 };
        let mut tid = tid;
        let mut tmfd = pg_sys::TM_FailureData::default();
        // SAFETY: tuple_lock on the session's relation into its lock slot,
        // as ExecOnConflictUpdate (flags 0) and the READ COMMITTED recheck
        // of ExecUpdate (FIND_LAST_VERSION) call it; the snapshot argument
        // is unused by heap's implementation, which fetches with a dirty
        // snapshot when it follows an update chain.
        let result = unsafe {
            if self.locked.is_null() {
                self.locked = pg_sys::table_slot_create(self.rel, std::ptr::null_mut());
            }
            let am = &*(*self.rel).rd_tableam;
            let lock = am.tuple_lock.expect("a table access method locks tuples");
            pg_sys::ExecClearTuple(self.locked);
            lock(
                self.rel,
                &mut tid,
                pg_sys::GetActiveSnapshot(),
                self.locked,
                self.cid,
                pg_sys::LockTupleMode::LockTupleNoKeyExclusive,
                pg_sys::LockWaitPolicy::LockWaitBlock,
                flags,
                &mut tmfd,
            )
        };
        match result {
            pg_sys::TM_Result::TM_Ok => {}
            pg_sys::TM_Result::TM_Deleted if !snapshot_per_transaction => return Locked::Gone,
            pg_sys::TM_Result::TM_Updated | pg_sys::TM_Result::TM_Deleted => super::serialization_failure(),
            other => pgrx::error!("webhook_dedup: locking a key returned {other} (TM_Result)"),
        }
        // SAFETY: the slot holds the locked tuple (TM_Ok), pinned.
        unsafe {
            if snapshot_per_transaction
                && !pg_sys::table_tuple_satisfies_snapshot(self.rel, self.locked, pg_sys::GetTransactionSnapshot())
            {
                super::serialization_failure();
            }
            pg_sys::slot_getallattrs(self.locked);
            let mut v = Values::empty();
            for c in 0..COLUMNS.len() {
                v.values[c] = *(*self.locked).tts_values.add(self.layout.at[c]);
                v.nulls[c] = *(*self.locked).tts_isnull.add(self.layout.at[c]);
            }
            if v.get::<&str>(Col::Source) != Some(key.source) || v.get::<&str>(Col::IdemKey) != Some(key.idem_key) {
                return Locked::Gone;
            }
            Locked::Row(v, (*self.locked).tts_tid)
        }
    }

    /// 55000 when the table may not be updated: it is published for
    /// updates without a usable replica identity (or a publication's column
    /// list does not cover it), as the executor raises when an UPDATE or an
    /// `INSERT ... ON CONFLICT DO UPDATE` starts, whether or not a row then
    /// matches or conflicts (checked on PostgreSQL 15).
    pub fn check_updatable(&self) {
        // SAFETY: the session's open relation.
        unsafe { pg_sys::CheckCmdReplicaIdentity(self.rel, pg_sys::CmdType::CMD_UPDATE) };
    }

    /// Write `values` as the new version of the row at `tid`, which this
    /// session locked (so the update cannot meet a concurrent change).
    /// Refused (55000) as the UPDATE would be when the table is published
    /// for updates without a usable replica identity
    /// ([`Session::check_updatable`]).
    pub fn update(&mut self, tid: pg_sys::ItemPointerData, values: &Values) {
        assert!(!self.look_only, "webhook_dedup: a session opened to look does not write");
        self.check_updatable();
        // SAFETY: the values are the locked row's (its buffer stays pinned
        // by the lock slot until the next lock or close) or of the call.
        unsafe { self.fill(values) };
        let mut tid = tid;
        let mut tmfd = pg_sys::TM_FailureData::default();
        let mut lockmode: pg_sys::LockTupleMode::Type = 0;
        // SAFETY: ExecUpdate's table_tuple_update and index insertion, on a
        // row this transaction holds locked.
        unsafe {
            let am = &*(*self.rel).rd_tableam;
            let update = am.tuple_update.expect("a table access method updates tuples");
            #[cfg(any(feature = "pg13", feature = "pg14", feature = "pg15"))]
            let (result, index_update) = {
                let mut update_indexes = false;
                let result = update(
                    self.rel,
                    &mut tid,
                    self.slot,
                    self.cid,
                    pg_sys::GetActiveSnapshot(),
                    std::ptr::null_mut(),
                    true,
                    &mut tmfd,
                    &mut lockmode,
                    &mut update_indexes,
                );
                (result, update_indexes.then_some(false))
            };
            #[cfg(any(feature = "pg16", feature = "pg17", feature = "pg18"))]
            let (result, index_update) = {
                let mut update_indexes = pg_sys::TU_UpdateIndexes::TU_None;
                let result = update(
                    self.rel,
                    &mut tid,
                    self.slot,
                    self.cid,
                    pg_sys::GetActiveSnapshot(),
                    std::ptr::null_mut(),
                    true,
                    &mut tmfd,
                    &mut lockmode,
                    &mut update_indexes,
                );
                let index_update = match update_indexes {
                    pg_sys::TU_UpdateIndexes::TU_None => None,
                    pg_sys::TU_UpdateIndexes::TU_Summarizing => Some(true),
                    _ => Some(false),
                };
                (result, index_update)
            };
            if result != pg_sys::TM_Result::TM_Ok {
                pgrx::error!("webhook_dedup: updating a locked key returned {result} (TM_Result)");
            }
            // Not HOT: index entries for the new version, with the hint
            // that an index's columns are unchanged (bottom-up deletion)
            // given as the executor gives it for the equivalent UPDATE.
            if let Some(only_summarizing) = index_update {
                self.hint_unchanged_indexes(values);
                let recheck = insert_index_tuples_for_update(self.rri, self.slot, self.estate, only_summarizing);
                if !recheck.is_null() {
                    pg_sys::list_free(recheck);
                }
            }
        }
        self.wrote = true;
    }
}

impl Session {
    /// Tell `ExecInsertIndexTuples` which indexes the update leaves
    /// unchanged, as `index_unchanged_by_update` would for the UPDATE whose
    /// SET list is the columns `values` set: an index without expressions
    /// or a predicate none of whose columns is set. The executor computes
    /// this from the range table's updated columns, which this module has
    /// not (no range table), and from PostgreSQL 15 on caches the answer in
    /// each `IndexInfo` (`ii_CheckedUnchanged`, `ii_IndexUnchanged`), where
    /// it is put here for this update. PostgreSQL 13 has no such hint, and
    /// 14 no such cache: there the update is told "insert" (no hint; its
    /// `index_unchanged_by_update` would read the range table).
    fn hint_unchanged_indexes(&self, values: &Values) {
        #[cfg(not(any(feature = "pg13", feature = "pg14")))]
        // SAFETY: the arrays have ri_NumIndices entries (ExecOpenIndices);
        // each IndexInfo is the session's own.
        unsafe {
            let changed_attrs: Vec<i16> = (0..COLUMNS.len())
                .filter(|c| values.set & (1 << c) != 0)
                .map(|c| self.layout.at[c] as i16 + 1)
                .collect();
            for i in 0..(*self.rri).ri_NumIndices as usize {
                let info = &mut **(*self.rri).ri_IndexRelationInfo.add(i);
                let columns = &info.ii_IndexAttrNumbers[..info.ii_NumIndexAttrs as usize];
                info.ii_CheckedUnchanged = true;
                info.ii_IndexUnchanged = info.ii_Expressions.is_null()
                    && info.ii_Predicate.is_null()
                    && !columns.iter().any(|attr| changed_attrs.contains(attr));
            }
        }
        #[cfg(any(feature = "pg13", feature = "pg14"))]
        let _ = values;
    }
}

/// `ExecOpenIndices` (speculative) for the primary key alone: the one
/// index a session that only looks uses (to probe and to find a key).
/// Without a primary key no index is open, and [`arbiter`] declines.
///
/// # Safety
/// `rri` is a result relation without open indexes; what is opened is
/// closed by `ExecCloseIndices`, as for `ExecOpenIndices`.
unsafe fn open_primary_key(rri: *mut pg_sys::ResultRelInfo) {
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
unsafe fn written_here(tuple: pg_sys::HeapTuple) -> bool {
    // SAFETY: per the contract.
    unsafe {
        let header = &*(*tuple).t_data;
        header.t_infomask & pg_sys::HEAP_XMIN_COMMITTED as u16 == 0
            && pg_sys::TransactionIdIsCurrentTransactionId(header.t_choice.t_heap.t_xmin)
    }
}

/// The columns [`Session::read_row`] copies of a key's row.
const READ: [Col; 14] = [
    Col::Source,
    Col::IdemKey,
    Col::State,
    Col::Attempt,
    Col::ClaimToken,
    Col::LeaseExpiresAt,
    Col::NextAttemptAt,
    Col::Fingerprint,
    Col::EventType,
    Col::Result,
    Col::LastStep,
    Col::FirstSeenAt,
    Col::DueAt,
    Col::LastSeenAt,
];

/// A read row copied ([`Values::key_row`]) with its `last_seen_at`, or
/// None when this transaction wrote it (`ours`). `attr` gives the datums of
/// a row whose buffer is pinned while this runs; call it while connected
/// to SPI.
fn copy_unless_ours(attr: &dyn Fn(Col) -> (Datum, bool), ours: bool) -> Option<(KeyRow, i64)> {
    if ours {
        return None;
    }
    let mut v = Values::empty();
    for col in READ {
        let (datum, null) = attr(col);
        v.set(col, (!null).then_some(datum));
    }
    Some((v.key_row(), v.timestamp(Col::LastSeenAt).expect("last_seen_at is NOT NULL")))
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
    conflict: Option<&mut bool>,
    arbiters: *mut pg_sys::List,
) -> *mut pg_sys::List {
    let conflict = conflict.map_or(std::ptr::null_mut(), |c| c as *mut bool);
    // SAFETY: forwarded (caller).
    unsafe {
        super::index_predicates::reuse(rri);
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
unsafe fn insert_index_tuples_for_update(
    rri: *mut pg_sys::ResultRelInfo,
    slot: *mut pg_sys::TupleTableSlot,
    estate: *mut pg_sys::EState,
    only_summarizing: bool,
) -> *mut pg_sys::List {
    // SAFETY: forwarded (caller).
    unsafe {
        super::index_predicates::reuse(rri);
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
