//! The keys table opened for direct writes ([`Session`]): the probe, the
//! speculative insert of a new key, the lock and update of a known one,
//! the reads of a look, in the executor's order.

#[allow(unused_imports)]
use super::*;

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
    pub(super) relid: Oid,
    pub(super) rel: pg_sys::Relation,
    pub(super) estate: *mut pg_sys::EState,
    pub(super) rri: *mut pg_sys::ResultRelInfo,
    pub(super) layout: Layout,
    pub(super) arbiters: *mut pg_sys::List,
    pub(super) cid: pg_sys::CommandId,
    /// For the rows this session writes.
    pub(super) slot: *mut pg_sys::TupleTableSlot,
    /// For the row it locks (holds its buffer pin until cleared); made on
    /// first use (a new key needs none).
    pub(super) locked: *mut pg_sys::TupleTableSlot,
    pub(super) wrote: bool,
    /// Opened by [`Session::open_to_look`]: only the primary key is open,
    /// so nothing may be written.
    pub(super) look_only: bool,
}

impl Session {
    /// Open the keys table for direct writes of `source`'s keys, or None
    /// (declined: use SQL; see the module documentation for when).
    /// Distributed on Citus, the table written is the source's shard when
    /// it is on this node, its locks taken as Citus's executor takes them
    /// for a write ([`super::super::local_shard::lock`]).
    pub fn open(conn: &crate::spi::Conn<'_>, source: &str) -> Option<Session> {
        Session::open_for(conn, source, true)
    }

    /// [`Session::open`] for [`Session::look`] alone: distributed on Citus,
    /// the shard is opened without the metadata lock Citus takes for writes
    /// ([`super::super::local_shard::readable`]), which the bounded wait would
    /// otherwise hold while it sleeps.
    pub fn open_to_look(conn: &crate::spi::Conn<'_>, source: &str) -> Option<Session> {
        Session::open_for(conn, source, false)
    }

    pub(super) fn open_for(conn: &crate::spi::Conn<'_>, source: &str, write: bool) -> Option<Session> {
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
            true if write => super::super::local_shard::lock(conn, keys, source)?.keys,
            true => super::super::local_shard::readable(conn, keys, source)?,
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
    pub(super) unsafe fn fill(&self, values: &Values) {
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
    pub(super) fn probe(&self, tid: &mut pg_sys::ItemPointerData) -> bool {
        pg_sys::check_for_interrupts!();
        // SAFETY: as ExecCheckIndexConstraints, on the session's state.
        unsafe { check_index_constraints(self.rri, self.slot, self.estate, tid, self.arbiters) }
    }

    /// Store a new key for the delivery `d`, leased to `d.token`: what
    /// `claim_upsert.sql` does when the key is new. The caller runs under
    /// READ COMMITTED or has checked that the key is not one its snapshot
    /// cannot see ([`super::super::visible_conflict`]).
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
        let snapshot_per_transaction = super::super::transaction_snapshot();
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
    pub(super) fn scan_key<T>(
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
    pub(super) fn arbiter_oid(&self) -> Oid {
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
        let snapshot_per_transaction = super::super::transaction_snapshot();
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
            pg_sys::TM_Result::TM_Updated | pg_sys::TM_Result::TM_Deleted => super::super::serialization_failure(),
            other => pgrx::error!("webhook_dedup: locking a key returned {other} (TM_Result)"),
        }
        // SAFETY: the slot holds the locked tuple (TM_Ok), pinned.
        unsafe {
            if snapshot_per_transaction
                && !pg_sys::table_tuple_satisfies_snapshot(self.rel, self.locked, pg_sys::GetTransactionSnapshot())
            {
                super::super::serialization_failure();
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
    pub(super) fn hint_unchanged_indexes(&self, values: &Values) {
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
