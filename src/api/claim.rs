//! `webhook_claim` and `webhook_complete`: the claim-and-process path.
//! [`crate::claim`] decides; [`crate::store`] reads and writes.

use super::args;
use crate::claim::{decide, Outcome, State, Write};
use crate::error::{required, Error, Raise};
use crate::jsonb::Jsonb;
use crate::metrics::{self, Counter};
use crate::spi::{self, Conn};
use crate::store::archive::Archived;
use crate::store::claim::{Delivery, Lease, Via};
use crate::store::direct::{Col, Insert, Locked, Session, Values};
use crate::store::transitions::Completed;
use crate::store::{self, sources, Key, KeyRow, Upserted};
use crate::time::{clock_now, timestamptz};
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::{IntoDatum, Uuid};

/// One claim's answer: the columns of `webhook_claim`, in its order, and
/// when a retry could succeed (`webhook_receive`'s `Retry-After`).
pub(crate) struct ClaimRow {
    pub outcome: String,
    pub token: Option<Uuid>,
    pub attempt: i32,
    pub state: String,
    pub result: Option<Jsonb>,
    pub last_step: Option<String>,
    pub first_seen_at: TimestampWithTimeZone,
    pub lease_expires_at: Option<TimestampWithTimeZone>,
    /// `in_progress`: the holder's lease expiry; `retry_later`: the next
    /// attempt's time (microseconds since 2000); else None.
    pub retry_at: Option<i64>,
    /// The database clock the claim decided at (microseconds): a new key's
    /// `first_seen_at`, a conflict's `seen_at`.
    pub at: i64,
    /// The claim stored the key (its first delivery), not only leased it
    /// (a pending key is `claimed` too).
    pub inserted: bool,
}

impl ClaimRow {
    /// Whether the claim's delivery is one the payload archive keeps
    /// (`Some(conflict)`): a new key's first delivery (false), or a
    /// conflicting one (true). Not a pending key's claim: its first
    /// delivery was archived when it was stored.
    pub(crate) fn archived_as(&self) -> Option<bool> {
        if self.inserted {
            Some(false)
        } else {
            (self.outcome == "conflict").then_some(true)
        }
    }
}

/// Claim one delivery of a key: returns exactly one row saying whether the
/// caller must process it (`claimed`, `reclaimed`: then `claim_token` is set
/// and the lease runs until `lease_expires_at`) or not (`in_progress`,
/// `duplicate` with the stored `result`, `conflict`, `retry_later`,
/// `unknown_outcome`, `dead_lettered`).
///
/// - `source`, `idem_key`: 1 to 255 characters (NULL 22004, empty or
///   longer 22023).
/// - `payload`: when given, its SHA-256 is the key's fingerprint; a later
///   delivery with another payload is a `conflict`, recorded in
///   `webhook_dedup.conflicts`.
/// - `lease`: positive interval of at most 365 days, without months
///   (22023 otherwise); NULL means the source's lease in
///   `webhook_dedup.sources`, else `webhook_dedup.default_lease`.
/// - `event_type`: stored with the key and used to label metrics.
///
/// Runs in the caller's transaction: a rollback frees the claim. Times are
/// the database clock (`clock_timestamp()`) at the call. Under REPEATABLE
/// READ or SERIALIZABLE, 40001 when the key changed after the snapshot.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
fn webhook_claim(
    source: Option<&str>,
    idem_key: Option<&str>,
    payload: default!(Option<&[u8]>, "NULL"),
    lease: default!(Option<Interval>, "NULL"),
    event_type: default!(Option<&str>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> pgrx::composite_type!('static, "webhook_dedup.claim_result") {
    let key = args::key(source, idem_key);
    let lease_us = lease.map(args::lease);
    let fingerprint = payload.map(crate::signature::ct::sha256);
    let row = spi::connected(|conn| {
        let row = claim_one(conn, key, fingerprint.as_ref().map(<[u8; 32]>::as_slice), None, lease_us, event_type);
        if let (Some(payload), Some(conflict)) = (payload, row.archived_as()) {
            super::archive::keep(
                conn,
                &Archived { key, received_at: row.at, event_id: None, event_type, conflict, payload, headers: None },
            );
        }
        row
    });
    super::rows::one_row(
        fcinfo,
        [
            row.outcome.into_datum(),
            row.token.into_datum(),
            row.attempt.into_datum(),
            row.state.into_datum(),
            row.result.into_datum(),
            row.last_step.into_datum(),
            row.first_seen_at.into_datum(),
            row.lease_expires_at.into_datum(),
        ],
    )
}

/// Where the writes to a known key go. (One per claim, on the stack: no box.)
#[allow(clippy::large_enum_variant)]
enum Known {
    /// The upsert statement locked the key and counted the delivery; what
    /// the decision writes besides is one more statement.
    Sql,
    /// The key's row is locked by the session; its values, the delivery
    /// counted, are written once, with whatever the decision adds.
    Direct { session: Session, tid: pg_sys::ItemPointerData, values: Values },
    /// Answered from the row as read, without a lock or a write: a recent
    /// duplicate ([`unrecorded`]).
    Read,
}

/// `webhook_dedup.duplicate_record_interval` (microseconds) when a recent
/// duplicate may be answered with a read alone in this call: it is not 0,
/// the transaction runs under READ COMMITTED, and the per-source counters
/// are in shared memory to count the delivery (without
/// `shared_preload_libraries` nothing else would: every delivery is then
/// recorded on its key, as before issue 29). Not in a read-only
/// transaction (a standby's, or `SET TRANSACTION READ ONLY`): there a
/// claim is refused with 25006 as any write is, whatever it would find.
pub(crate) fn duplicate_read_interval() -> Option<i64> {
    let interval = crate::guc::duplicate_record_interval_us();
    // SAFETY: reads a backend-global of the current transaction.
    let read_only = unsafe { pg_sys::XactReadOnly };
    (interval > 0 && !read_only && !store::transaction_snapshot() && metrics::shared()).then_some(interval)
}

/// The row of `key` when this delivery of it is answered from the stored
/// state without a write ([`crate::claim::records_touch`]; issue 29): under
/// READ COMMITTED (the isolation levels that read one snapshot keep the
/// locked read, whose changed-row check raises 40001), from the version
/// the latest snapshot sees, committed by another transaction (the probe
/// that found the key waited for its writers). Nothing is locked: a
/// concurrent change that commits after this read is ordered after this
/// delivery, as a plain `INSERT ... ON CONFLICT DO NOTHING` orders it.
/// `None`: lock the row and write as for any other delivery.
fn unrecorded(
    session: &mut Session,
    key: Key<'_>,
    tid: pg_sys::ItemPointerData,
    now: i64,
    fingerprint: Option<&[u8]>,
    raw: Option<&[u8]>,
    settings: &sources::SourceSettings,
) -> Option<KeyRow> {
    let interval = duplicate_read_interval()?;
    let (found, last_seen_at) = session.read_row_at(key, tid)?;
    let given = crate::claim::same_bytes(found.fingerprint.as_deref(), fingerprint, raw);
    let decision = decide(Some(&found.stored()), now, given, settings.max_attempts());
    let adopts = found.fingerprint.is_none() && fingerprint.is_some();
    let interval = crate::claim::unrecorded_interval(interval, settings.retention_us());
    (!crate::claim::records_touch(decision, adopts, last_seen_at, now, interval)).then_some(found)
}

/// The answer to a delivery of a known key that leaves its state alone
/// ([`Write::Touch`]): the stored state, `result` (None for a conflict,
/// which never sees what another payload's holder stored), and when to
/// retry (`in_progress`: the lease's expiry; `retry_later`: the next
/// attempt's time).
fn touch_row(found: &KeyRow, result: Option<Jsonb>, outcome: Outcome, now: i64) -> ClaimRow {
    let last_step = if outcome == Outcome::Conflict { None } else { found.last_step.clone() };
    let retry_at = match outcome {
        Outcome::InProgress => found.lease_expires_at,
        Outcome::RetryLater => found.next_attempt_at,
        _ => None,
    };
    ClaimRow {
        outcome: outcome.as_str().to_string(),
        token: None,
        attempt: found.attempt,
        state: found.state.as_str().into(),
        result,
        last_step,
        first_seen_at: timestamptz(found.first_seen_at),
        lease_expires_at: found.lease_expires_at.map(timestamptz),
        retry_at,
        at: now,
        inserted: false,
    }
}

/// A recent duplicate of `key` answered with a read alone, before any
/// other statement of the call (`webhook_receive` with the replay guard:
/// its guard statements would lock and write): the key's row read as
/// [`unrecorded`] reads it, without the primary key's probe (a key being
/// inserted right now is not visible, and is left to the claim, which
/// waits for it). `confirm` is asked last, before the delivery is
/// counted: false leaves it to the caller's full path too. `None`: no such
/// key, or a delivery that must be written.
pub(crate) fn read_answer(
    conn: &Conn<'_>,
    key: Key<'_>,
    fingerprint: Option<&[u8]>,
    raw: Option<&[u8]>,
    event_type: Option<&str>,
    yield_if_held: bool,
    confirm: impl FnOnce() -> bool,
) -> Option<ClaimRow> {
    let interval = duplicate_read_interval()?;
    let mut session = Session::open_to_look(conn, key.source)?;
    // refused as the claim's upsert would be (55000), whatever it finds
    session.check_updatable();
    // the probe waits for a transaction writing the key (an insert, a
    // delete, an update), as the claim's own probe does
    let read = session.locate(key).and_then(|tid| session.read_row_at(key, tid));
    session.close();
    let (found, last_seen_at) = read?;
    let now = clock_now();
    let settings = sources::settings(conn, key.source);
    let given = crate::claim::same_bytes(found.fingerprint.as_deref(), fingerprint, raw);
    let decision = decide(Some(&found.stored()), now, given, settings.max_attempts());
    let adopts = found.fingerprint.is_none() && fingerprint.is_some();
    let interval = crate::claim::unrecorded_interval(interval, settings.retention_us());
    // a caller that waits for a holder (webhook_receive's `wait`) waits
    // for this one too, through its full path
    let held = yield_if_held && decision.outcome == Outcome::InProgress;
    if held || crate::claim::records_touch(decision, adopts, last_seen_at, now, interval) || !confirm() {
        return None;
    }
    let label = found.event_type.clone().or(event_type.map(str::to_string));
    metrics::count(key.source, label.as_deref(), Counter::for_outcome(decision.outcome), true);
    Some(touch_row(&found, found.result, decision.outcome, now))
}

/// One claim: the body of `webhook_claim`, of each key of
/// `webhook_claim_many` and of `webhook_receive`.
///
/// A new key is one insert; a known key one locked read and one write,
/// both without an SQL plan when the table allows ([`crate::store::direct`]),
/// else the upsert statement (which locks the key and counts the delivery)
/// and, when the decision writes more (a reclaim, a dead letter), one more
/// statement. A conflicting payload is recorded with one statement more.
pub(crate) fn claim_one(
    conn: &Conn<'_>,
    key: Key<'_>,
    fingerprint: Option<&[u8]>,
    raw: Option<&[u8]>,
    lease_us: Option<i64>,
    event_type: Option<&str>,
) -> ClaimRow {
    claim_unless_held(conn, key, fingerprint, raw, lease_us, event_type, false)
        .expect("a claim that may not yield answers")
}

/// The lease expiry of `looked`, a key as [`crate::store::look`] found it,
/// when another worker holds it so that a claim of this content would
/// answer `in_progress` now ([`crate::claim::decide`], the state machine's
/// own rule); `None` when a claim would answer anything else, or when this
/// transaction wrote the version (its lock is ours: no holder could
/// complete it while we wait). What the bounded wait waits on.
pub(crate) fn held_elsewhere(
    looked: &crate::store::direct::Looked,
    now: i64,
    fingerprint: Option<&[u8]>,
    raw: Option<&[u8]>,
    max_attempts: i32,
) -> Option<i64> {
    if looked.ours {
        return None;
    }
    let stored = &looked.stored;
    let fingerprint = crate::claim::same_bytes(stored.fingerprint.as_deref(), fingerprint, raw);
    // A processing row without an expiry (only an operator's UPDATE makes
    // one) is held until a change: the wait then polls.
    (decide(Some(stored), now, fingerprint, max_attempts).outcome == Outcome::InProgress)
        .then(|| stored.lease_expires_at.unwrap_or(i64::MAX))
}

/// [`claim_one`], except that with `yield_if_held` a key found held by
/// another worker's live lease (another copy of the delivery inserted it
/// after the caller's bounded wait looked) is left alone, before its row
/// is locked: `None`, nothing written or counted, so that the caller can
/// wait for the holder and claim again (`webhook_receive`). A claim's lock
/// on the row would last until the caller's transaction ends and make the
/// holder's completion wait for it. Only where the claim runs without SQL
/// ([`crate::store::direct`]); the upsert statement locks at once.
pub(crate) fn claim_unless_held(
    conn: &Conn<'_>,
    key: Key<'_>,
    fingerprint: Option<&[u8]>,
    raw: Option<&[u8]>,
    lease_us: Option<i64>,
    event_type: Option<&str>,
    yield_if_held: bool,
) -> Option<ClaimRow> {
    store::visible_conflict(conn, key);
    let now = clock_now();
    let lease_for = |settings: &Option<sources::SourceSettings>| {
        lease_us
            .unwrap_or_else(|| settings.as_ref().map_or_else(crate::guc::default_lease_us, |s| s.default_lease_us()))
    };
    // The source's settings are read only when needed: the lease when the
    // call gives none, the attempts when a key is known.
    let mut settings = lease_us.is_none().then(|| sources::settings(conn, key.source));
    let token = store::new_token();
    let until = now.saturating_add(lease_for(&settings));
    let delivery = Delivery { key, now, token, lease_until: until, fingerprint, event_type };
    let claimed = || {
        metrics::count(key.source, event_type, Counter::for_outcome(Outcome::Claimed), true);
        ClaimRow {
            outcome: Outcome::Claimed.as_str().to_string(),
            token: Some(token),
            attempt: 1,
            state: State::Processing.as_str().to_string(),
            result: None,
            last_step: None,
            first_seen_at: timestamptz(now),
            lease_expires_at: Some(timestamptz(until)),
            retry_at: None,
            at: now,
            inserted: true,
        }
    };
    let (found, mut known) = match Session::open(conn, key.source) {
        // claim_upsert.sql is INSERT ... ON CONFLICT DO UPDATE, which the
        // executor refuses at its start on a table published for updates
        // without a replica identity, even for a key that turns out new
        Some(mut session) => {
            session.check_updatable();
            loop {
                match session.insert_claim(&delivery) {
                    Insert::Inserted => {
                        session.close();
                        return Some(claimed());
                    }
                    Insert::Known(_)
                        if yield_if_held && {
                            let max_attempts =
                                settings.get_or_insert_with(|| sources::settings(conn, key.source)).max_attempts();
                            session.look(key).is_some_and(|looked| {
                                held_elsewhere(&looked, now, fingerprint, raw, max_attempts).is_some()
                            })
                        } =>
                    {
                        session.close();
                        return None;
                    }
                    Insert::Known(tid) => {
                        let known = settings.get_or_insert_with(|| sources::settings(conn, key.source));
                        if let Some(found) = unrecorded(&mut session, key, tid, now, fingerprint, raw, known) {
                            session.close();
                            break (found, Known::Read);
                        }
                        match session.lock(key, tid) {
                            // deleted since the probe (webhook_forget, retention): new again
                            Locked::Gone => continue,
                            Locked::Row(mut values, tid) => {
                                // the count every delivery of a known key makes (as
                                // claim_upsert.sql's DO UPDATE)
                                let Some(deliveries) = values.count(Col::Deliveries).checked_add(1) else {
                                    // what the statement's int4 addition raises
                                    pgrx::ereport!(
                                        ERROR,
                                        PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                                        "integer out of range"
                                    );
                                };
                                values.set(Col::Deliveries, deliveries.into_datum());
                                values.set(Col::LastSeenAt, timestamptz(now).into_datum());
                                if values.is_null(Col::Fingerprint) {
                                    values.set(Col::Fingerprint, fingerprint.into_datum());
                                }
                                break (values.key_row(), Known::Direct { session, tid, values });
                            }
                        }
                    }
                }
            }
        }
        None => match store::claim::upsert(conn, &delivery) {
            Upserted::Inserted => return Some(claimed()),
            Upserted::Known(found) => (*found, Known::Sql),
        },
    };
    let settings = settings.take().unwrap_or_else(|| sources::settings(conn, key.source));
    let fingerprint = crate::claim::same_bytes(found.fingerprint.as_deref(), fingerprint, raw);
    let decision = decide(Some(&found.stored()), now, fingerprint, settings.max_attempts());
    let label = found.event_type.clone().or(event_type.map(str::to_string));
    let outcome = decision.outcome.as_str().to_string();
    let conflict = decision.outcome == Outcome::Conflict;
    let row: ClaimRow = match decision.write {
        Write::Lease { attempt } => {
            let until = now.saturating_add(lease_for(&Some(settings)));
            match &mut known {
                Known::Read => unreachable!("a lease is written"),
                Known::Sql => store::claim::lease(conn, key, &Lease { now, attempt, token, until, event_type }),
                Known::Direct { values, .. } => {
                    let until = timestamptz(until);
                    values.set(Col::State, State::Processing.as_str().into_datum());
                    values.set(Col::Attempt, attempt.into_datum());
                    values.set(Col::ClaimToken, token.into_datum());
                    values.set(Col::LeaseExpiresAt, until.into_datum());
                    values.set(Col::DueAt, until.into_datum());
                    values.set(Col::LeasedAt, timestamptz(now).into_datum());
                    values.set(Col::NextAttemptAt, None);
                    if values.is_null(Col::EventType) {
                        values.set(Col::EventType, event_type.into_datum());
                    }
                }
            }
            let KeyRow { result, last_step, first_seen_at, .. } = found;
            ClaimRow {
                outcome,
                token: Some(token),
                attempt,
                state: State::Processing.as_str().into(),
                result,
                last_step,
                first_seen_at: timestamptz(first_seen_at),
                lease_expires_at: Some(timestamptz(until)),
                retry_at: None,
                at: now,
                inserted: false,
            }
        }
        Write::Touch => {
            // A conflicting delivery never sees what the other payload's
            // holder stored.
            let result = if conflict { None } else { found.result };
            touch_row(&found, result, decision.outcome, now)
        }
        Write::DeadLetter => {
            match &mut known {
                Known::Read => unreachable!("a dead letter is written"),
                Known::Sql => store::transitions::dead_letter_exhausted(conn, &found, now),
                Known::Direct { values, .. } => {
                    let error = crate::claim::exhausted_error(found.attempt);
                    values.set(Col::State, State::DeadLettered.as_str().into_datum());
                    values.set(Col::NextAttemptAt, None);
                    values.set(Col::DueAt, None);
                    values.set(Col::LeaseExpiresAt, None);
                    values.set(Col::LastError, error.as_str().into_datum());
                }
            }
            ClaimRow {
                outcome,
                token: None,
                attempt: found.attempt,
                state: State::DeadLettered.as_str().into(),
                result: None,
                last_step: found.last_step.clone(),
                first_seen_at: timestamptz(found.first_seen_at),
                lease_expires_at: None,
                retry_at: None,
                at: now,
                inserted: false,
            }
        }
        Write::Insert => unreachable!("the key is known"),
    };
    if let Known::Direct { mut session, tid, values } = known {
        session.update(tid, &values);
        session.close();
    }
    if conflict {
        let (stored, given) = (found.fingerprint.as_deref(), fingerprint);
        store::claim::record_conflict(
            conn,
            key,
            now,
            stored.unwrap_or_default(),
            given.unwrap_or_default(),
            Via::Claim,
        );
    }
    metrics::count(key.source, label.as_deref(), Counter::for_outcome(decision.outcome), true);
    if decision.write == Write::DeadLetter {
        metrics::count(key.source, label.as_deref(), Counter::DeadLetters, false);
    }
    Some(row)
}

/// Claim several keys of one source in one call, for a delivery that
/// carries several events. The keys are claimed one by one in sorted order
/// (duplicates once), so two transactions claiming overlapping keys in any
/// order never deadlock: the second waits for the first's keys and then
/// sees them `in_progress` (or completed). One row per distinct key, with
/// the columns of `webhook_claim` and the key first. Payload fingerprints
/// are not compared here (use `webhook_claim` per key for that). Every key
/// is checked before any is claimed. A transaction may claim any number of
/// keys (each holds a row lock, not an entry of the lock table). Errors as
/// `webhook_claim`, for the source and every key; 22004 for a NULL key.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
#[allow(clippy::type_complexity)] // pgrx needs the column names inline
fn webhook_claim_many(
    source: Option<&str>,
    idem_keys: Option<Vec<Option<String>>>,
    lease: default!(Option<Interval>, "NULL"),
    event_type: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(idem_key, String),
        name!(outcome, String),
        name!(claim_token, Option<Uuid>),
        name!(attempt, i32),
        name!(state, String),
        name!(result, Option<Jsonb>),
        name!(last_step, Option<String>),
        name!(first_seen_at, TimestampWithTimeZone),
        name!(lease_expires_at, Option<TimestampWithTimeZone>),
    ),
> {
    let keys = required(idem_keys, "idem_keys");
    let mut keys: Vec<String> = keys
        .into_iter()
        .map(|k| k.unwrap_or_else(|| Error::NullValue { what: "every element of idem_keys" }.raise()))
        .collect();
    keys.sort();
    keys.dedup();
    for k in &keys {
        pg_sys::check_for_interrupts!(); // the array is the caller's
        args::key(source, Some(k));
    }
    let lease_us = lease.map(args::lease);
    let rows: Vec<_> = spi::connected(|conn| {
        keys.iter()
            .map(|k| {
                // direct writes run no executor, which would check
                pg_sys::check_for_interrupts!();
                let key = args::key(source, Some(k));
                let r = claim_one(conn, key, None, None, lease_us, event_type);
                (
                    k.clone(),
                    r.outcome,
                    r.token,
                    r.attempt,
                    r.state,
                    r.result,
                    r.last_step,
                    r.first_seen_at,
                    r.lease_expires_at,
                )
            })
            .collect()
    });
    TableIterator::new(rows)
}

/// `key_complete.sql` without an SQL plan ([`crate::store::direct`]):
/// check the token on the version of the key's row the statement would see
/// (no lock for a stale token, as the UPDATE's condition takes none), then
/// lock the row (its newest version), and complete it if `token` still
/// holds its lease.
fn complete_direct(
    conn: &Conn<'_>,
    mut session: Session,
    key: Key<'_>,
    token: Uuid,
    now: i64,
    result: Option<Jsonb>,
    expires_at: i64,
) -> Completed {
    // The UPDATE refuses a table published for updates without a replica
    // identity when it starts, before it matches anything.
    session.check_updatable();
    if !session.visible_holder(key, &token) {
        session.close();
        return store::transitions::unmatched(conn, key, token);
    }
    let completed = loop {
        let Some(tid) = session.locate(key) else {
            // The version the snapshot sees is held, but the key is gone
            // now: under REPEATABLE READ the UPDATE meets the deletion of
            // the row it found (40001); under READ COMMITTED it re-checks
            // and matches nothing (the key is unknown).
            if store::transaction_snapshot() {
                store::serialization_failure();
            }
            break Completed::Unknown;
        };
        match session.lock(key, tid) {
            // deleted since the probe: look again (it is gone, or new)
            Locked::Gone => continue,
            Locked::Row(mut values, tid) => {
                let event_type = values.event_type();
                if !values.held_by(&token) {
                    break Completed::Stale { event_type };
                }
                let now = timestamptz(now);
                values.set(Col::State, State::Completed.as_str().into_datum());
                values.set(Col::Result, result.into_datum());
                values.set(Col::CompletedAt, now.into_datum());
                values.set(Col::LastSeenAt, now.into_datum());
                values.set(Col::LeaseExpiresAt, None);
                values.set(Col::DueAt, None);
                values.set(Col::ExpiresAt, timestamptz(expires_at).into_datum());
                values.set(Col::ClaimToken, None);
                session.update(tid, &values);
                break Completed::Yes { event_type };
            }
        }
    };
    session.close();
    completed
}

/// Complete a claimed key: stores `result` (returned to later duplicates)
/// and marks the key `completed`. Returns true when `claim_token` held the
/// key's lease; false, changing nothing, when the token is stale (the
/// lease was reclaimed by another delivery, or the key is no longer
/// `processing`). An unknown key is P0002. Fencing is by token, not by
/// clock: a holder whose lease expired but was not reclaimed (nor swept by
/// maintenance, which moves it to `failed`) still completes. The completed
/// key is kept for its source's retention after its last activity.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
fn webhook_complete(
    source: Option<&str>,
    idem_key: Option<&str>,
    claim_token: Option<Uuid>,
    result: default!(Option<Jsonb>, "NULL"),
) -> bool {
    let key = args::key(source, idem_key);
    let token = required(claim_token, "claim_token");
    let now = clock_now();
    let completed = spi::connected(|conn| {
        let retention = sources::settings(conn, key.source).retention_us();
        let expires_at = now.saturating_add(retention);
        match Session::open(conn, key.source) {
            Some(session) => complete_direct(conn, session, key, token, now, result, expires_at),
            None => store::transitions::complete(conn, key, token, now, result, expires_at),
        }
    });
    let (done, label) = match completed {
        Completed::Yes { event_type } => {
            crate::wait::wake_at_commit(key);
            (true, event_type)
        }
        Completed::Stale { event_type } => (false, event_type),
        Completed::Unknown => Error::unknown_key(key.source, key.idem_key).raise(),
    };
    let counter = if done { Counter::Completions } else { Counter::StaleCompletions };
    metrics::count(key.source, label.as_deref(), counter, false);
    done
}
