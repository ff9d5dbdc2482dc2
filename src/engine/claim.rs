//! The claim and the completion of one delivery's key: the state
//! machine's decisions ([`crate::claim`]) over the store's reads and
//! transitions ([`crate::store::claim`], [`crate::store::transitions`]),
//! with the counts they make. Serves `webhook_claim`, `webhook_claim_many`,
//! `webhook_receive` and `webhook_complete`.

use super::Content;
use crate::claim::{decide, Outcome, State, Write};
use crate::error::{Error, Raise};
use crate::jsonb::Jsonb;
use crate::metrics::{self, Counter};
use crate::spi::Conn;
use crate::store::claim::{AnswerRead, Claimed, Delivery, Lease, Via, YieldIf};
use crate::store::direct_writes::{Looked, Session};
use crate::store::sources::{self, SourceSettings};
use crate::store::transitions::Completed;
use crate::store::{self, Key, KeyRow};
use crate::time::clock_now;
use pgrx::pg_sys;
use pgrx::Uuid;
use std::cell::OnceCell;

/// One claim's answer: the columns of `webhook_claim` (times in
/// microseconds since 2000) and when a retry could succeed
/// (`webhook_receive`'s `Retry-After`).
pub struct ClaimRow {
    pub outcome: Outcome,
    pub token: Option<Uuid>,
    pub attempt: i32,
    pub state: State,
    pub result: Option<Jsonb>,
    pub last_step: Option<String>,
    pub first_seen_at: i64,
    pub lease_expires_at: Option<i64>,
    /// `in_progress`: the holder's lease expiry; `retry_later`: the next
    /// attempt's time; else None.
    pub retry_at: Option<i64>,
    /// The database clock the claim decided at: a new key's
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
    pub fn archived_as(&self) -> Option<bool> {
        if self.inserted {
            Some(false)
        } else {
            (self.outcome == Outcome::Conflict).then_some(true)
        }
    }
}

/// A claim to make.
#[derive(Clone, Copy)]
pub struct Claim<'a> {
    pub key: Key<'a>,
    pub content: Content<'a>,
    /// The lease, in microseconds; None: the source's, else
    /// `webhook_dedup.default_lease`.
    pub lease_us: Option<i64>,
    pub event_type: Option<&'a str>,
    /// The source's settings when the caller read them already; else they
    /// are read only when needed (the lease when the call gives none, the
    /// attempts when the key is known).
    pub settings: Option<&'a SourceSettings>,
}

/// `webhook_dedup.duplicate_record_interval` (microseconds) when a recent
/// duplicate may be answered with a read alone in this call: it is not 0,
/// the transaction runs under READ COMMITTED, and the per-source counters
/// are in shared memory to count the delivery (without
/// `shared_preload_libraries` nothing else would: every delivery is then
/// recorded on its key). Not in a read-only transaction (a standby's, or
/// `SET TRANSACTION READ ONLY`): there a claim is refused with 25006 as
/// any write is, whatever it would find.
pub fn duplicate_read_interval() -> Option<i64> {
    let interval = crate::guc::duplicate_record_interval_us();
    // SAFETY: reads a backend-global of the current transaction.
    let read_only = unsafe { pg_sys::XactReadOnly };
    (interval > 0 && !read_only && !store::transaction_snapshot() && metrics::shared()).then_some(interval)
}

/// Whether the delivery of `found` (read without a lock, last seen at
/// `last_seen_at`) is answered from the stored state without a write
/// ([`crate::claim::records_touch`]): under READ COMMITTED, from the
/// version the latest snapshot sees, committed by another transaction.
/// Nothing is locked: a concurrent change that commits after this read is
/// ordered after this delivery, as a plain `INSERT ... ON CONFLICT DO
/// NOTHING` orders it.
fn answers_read(
    found: &KeyRow,
    last_seen_at: i64,
    now: i64,
    content: Content<'_>,
    settings: &SourceSettings,
    interval: i64,
) -> Option<Outcome> {
    let given = content.given(found.fingerprint.as_deref());
    let decision = decide(Some(&found.stored()), now, given, settings.max_attempts());
    let adopts = found.fingerprint.is_none() && content.fingerprint.is_some();
    let interval = crate::claim::unrecorded_interval(interval, settings.retention_us());
    (!crate::claim::records_touch(decision, adopts, last_seen_at, now, interval)).then_some(decision.outcome)
}

/// The answer to a delivery of a known key that leaves its state alone
/// ([`Write::Touch`]): the stored state, `result` (None for a conflict,
/// which never sees what another payload's holder stored), and when to
/// retry (`in_progress`: the lease's expiry; `retry_later`: the next
/// attempt's time).
fn touch_row(found: KeyRow, outcome: Outcome, now: i64) -> ClaimRow {
    let conflict = outcome == Outcome::Conflict;
    let retry_at = match outcome {
        Outcome::InProgress => found.lease_expires_at,
        Outcome::RetryLater => found.next_attempt_at,
        _ => None,
    };
    ClaimRow {
        outcome,
        token: None,
        attempt: found.attempt,
        state: found.state,
        result: if conflict { None } else { found.result },
        last_step: if conflict { None } else { found.last_step },
        first_seen_at: found.first_seen_at,
        lease_expires_at: found.lease_expires_at,
        retry_at,
        at: now,
        inserted: false,
    }
}

/// A recent duplicate of `key` answered with a read alone, before any
/// other statement of the call (`webhook_receive` with the replay guard:
/// its guard statements would lock and write): the key's row read as a
/// claim's [`answers_read`] reads it, without the claim's insert (a key
/// being inserted right now is not visible, and is left to the claim,
/// which waits for it). `yield_if_held`: a key held by another worker is
/// left to the caller, which waits for it. `confirm` is asked last, before
/// the delivery is counted: false leaves it to the caller's full path too.
/// `None`: no such key, or a delivery that must be written.
pub fn read_answer(
    conn: &Conn<'_>,
    c: &Claim<'_>,
    yield_if_held: bool,
    confirm: impl FnOnce() -> bool,
) -> Option<ClaimRow> {
    let interval = duplicate_read_interval()?;
    let mut session = Session::open_to_look(conn, c.key.source)?;
    // refused as the claim's upsert would be (55000), whatever it finds
    session.check_updatable();
    // the probe waits for a transaction writing the key (an insert, a
    // delete, an update), as the claim's own probe does
    let read = session.locate(c.key).and_then(|tid| session.read_row_at(c.key, tid));
    session.close();
    let (found, last_seen_at) = read?;
    let now = clock_now();
    let read_settings;
    let settings = match c.settings {
        Some(settings) => settings,
        None => {
            read_settings = sources::settings(conn, c.key.source);
            &read_settings
        }
    };
    let outcome = answers_read(&found, last_seen_at, now, c.content, settings, interval)?;
    // a caller that waits for a holder (webhook_receive's `wait`) waits
    // for this one too, through its full path
    if (yield_if_held && outcome == Outcome::InProgress) || !confirm() {
        return None;
    }
    let label = found.event_type.clone().or(c.event_type.map(str::to_string));
    metrics::count(c.key.source, label.as_deref(), Counter::for_outcome(outcome), true);
    Some(touch_row(found, outcome, now))
}

/// The lease expiry of `looked`, a key as [`crate::store::look`] found it,
/// when another worker holds it so that a claim of this content would
/// answer `in_progress` now ([`crate::claim::decide`], the state machine's
/// own rule); `None` when a claim would answer anything else, or when this
/// transaction wrote the version (its lock is ours: no holder could
/// complete it while we wait). What the bounded wait waits on.
pub fn held_elsewhere(looked: &Looked, now: i64, content: Content<'_>, max_attempts: i32) -> Option<i64> {
    if looked.ours {
        return None;
    }
    let stored = &looked.stored;
    let fingerprint = content.given(stored.fingerprint.as_deref());
    // A processing row without an expiry (only an operator's UPDATE makes
    // one) is held until a change: the wait then polls.
    (decide(Some(stored), now, fingerprint, max_attempts).outcome == Outcome::InProgress)
        .then(|| stored.lease_expires_at.unwrap_or(i64::MAX))
}

/// One claim: the body of `webhook_claim`, of each key of
/// `webhook_claim_many` and of `webhook_receive`.
///
/// A new key is one insert; a known key one locked read and one write,
/// both without an SQL plan when the table allows ([`crate::store::direct_writes`]),
/// else the upsert statement (which locks the key and counts the delivery)
/// and, when the decision writes more (a reclaim, a dead letter), one more
/// statement. A conflicting payload is recorded with one statement more.
pub fn claim(conn: &Conn<'_>, c: &Claim<'_>) -> ClaimRow {
    claim_unless_held(conn, c, false).expect("a claim that may not yield answers")
}

/// [`claim`], except that with `yield_if_held` a key found held by
/// another worker's live lease (another copy of the delivery inserted it
/// after the caller's bounded wait looked) is left alone, before its row
/// is locked: `None`, nothing written or counted, so that the caller can
/// wait for the holder and claim again (`webhook_receive`). A claim's lock
/// on the row would last until the caller's transaction ends and make the
/// holder's completion wait for it. Only where the claim runs without SQL
/// ([`crate::store::direct_writes`]); the upsert statement locks at once.
pub fn claim_unless_held(conn: &Conn<'_>, c: &Claim<'_>, yield_if_held: bool) -> Option<ClaimRow> {
    let key = c.key;
    store::visible_conflict(conn, key);
    let now = clock_now();
    let read = OnceCell::new();
    let settings = || c.settings.unwrap_or_else(|| read.get_or_init(|| sources::settings(conn, key.source)));
    let lease_us = || c.lease_us.unwrap_or_else(|| settings().default_lease_us());
    let token = store::new_token();
    let until = now.saturating_add(lease_us());
    let delivery =
        Delivery { key, now, token, lease_until: until, fingerprint: c.content.fingerprint, event_type: c.event_type };
    let interval = duplicate_read_interval();
    let mut held_elsewhere_now =
        |looked: &Looked| held_elsewhere(looked, now, c.content, settings().max_attempts()).is_some();
    let mut answer_read = |found: &KeyRow, last_seen_at: i64| {
        interval.and_then(|i| answers_read(found, last_seen_at, now, c.content, settings(), i)).is_some()
    };
    let claimed = store::claim::claim(
        conn,
        &delivery,
        yield_if_held.then_some(&mut held_elsewhere_now as YieldIf<'_>),
        interval.is_some().then_some(&mut answer_read as AnswerRead<'_>),
    );
    let (found, mut held) = match claimed {
        Claimed::Inserted => {
            metrics::count(key.source, c.event_type, Counter::for_outcome(Outcome::Claimed), true);
            return Some(ClaimRow {
                outcome: Outcome::Claimed,
                token: Some(token),
                attempt: 1,
                state: State::Processing,
                result: None,
                last_step: None,
                first_seen_at: now,
                lease_expires_at: Some(until),
                retry_at: None,
                at: now,
                inserted: true,
            });
        }
        Claimed::Yielded => return None,
        Claimed::Read(found) => (found, None),
        Claimed::Locked(found, held) => (found, Some(held)),
    };
    let fingerprint = c.content.given(found.fingerprint.as_deref());
    let decision = decide(Some(&found.stored()), now, fingerprint, settings().max_attempts());
    let label = found.event_type.clone().or(c.event_type.map(str::to_string));
    // what a conflict records: the stored fingerprint and the given one
    let conflict = (decision.outcome == Outcome::Conflict)
        .then(|| (found.fingerprint.clone().unwrap_or_default(), fingerprint.map(<[u8]>::to_vec).unwrap_or_default()));
    let row = match decision.write {
        Write::Lease { attempt } => {
            let until = now.saturating_add(lease_us());
            let lease = Lease { now, attempt, token, until, event_type: c.event_type };
            held.as_mut().expect("a lease is written").lease(conn, key, &lease);
            ClaimRow {
                outcome: decision.outcome,
                token: Some(token),
                attempt,
                state: State::Processing,
                result: found.result,
                last_step: found.last_step,
                first_seen_at: found.first_seen_at,
                lease_expires_at: Some(until),
                retry_at: None,
                at: now,
                inserted: false,
            }
        }
        Write::Touch => touch_row(found, decision.outcome, now),
        Write::DeadLetter => {
            held.as_mut().expect("a dead letter is written").dead_letter_exhausted(conn, &found, now);
            ClaimRow {
                outcome: decision.outcome,
                token: None,
                attempt: found.attempt,
                state: State::DeadLettered,
                result: None,
                last_step: found.last_step,
                first_seen_at: found.first_seen_at,
                lease_expires_at: None,
                retry_at: None,
                at: now,
                inserted: false,
            }
        }
        Write::Insert => unreachable!("the key is known"),
    };
    if let Some(held) = held {
        held.finish();
    }
    if let Some((stored, given)) = conflict {
        store::claim::record_conflict(conn, key, now, &stored, &given, Via::Claim);
    }
    metrics::count(key.source, label.as_deref(), Counter::for_outcome(decision.outcome), true);
    if decision.write == Write::DeadLetter {
        metrics::count(key.source, label.as_deref(), Counter::DeadLetters, false);
    }
    Some(row)
}

/// Complete `key` if `token` holds its lease, storing `result`, kept for
/// the source's retention from now; wakes the key's waiters at commit and
/// counts the completion (or the stale one). True when completed, false
/// for a stale token; P0002 for an unknown key.
pub fn complete(conn: &Conn<'_>, key: Key<'_>, token: Uuid, result: Option<Jsonb>) -> bool {
    let now = clock_now();
    let retention = sources::settings(conn, key.source).retention_us();
    let completed = store::transitions::complete(conn, key, token, now, result, now.saturating_add(retention));
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
