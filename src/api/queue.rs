//! Persist-then-process: `webhook_enqueue` stores a delivery (the receiver
//! answers 200 at once), `webhook_next` hands due keys to workers with a
//! lease, and the workers finish them with the same `webhook_complete`,
//! `webhook_fail` and `webhook_checkpoint` as claim-and-process receivers.

use super::args;
use crate::claim::{self, decide, decide_enqueue, Decision, Enqueued, Outcome, State, Write};
use crate::error::{required, Error, OrRaise, Raise};
use crate::jsonb::Jsonb;
use crate::metrics::{self, Counter};
use crate::spi::{self, Conn};
use crate::store::archive::Archived;
use crate::store::claim::{Lease, Via};
use crate::store::queue::Delivery;
use crate::store::{self, sources, Key, Upserted};
use crate::time::clock_now;
use pgrx::datum::Interval;
use pgrx::prelude::*;
use pgrx::Uuid;

/// Store a delivery for the workers: `accepted` (a new key, now `pending`
/// with its raw `payload` and optional `headers`), `duplicate` (the key is
/// known, in any state: nothing stored) or `conflict` (known with another
/// payload: recorded in `webhook_dedup.conflicts`, nothing stored). Answer
/// the provider 2xx for all three. Key rules as `webhook_claim`; NULL
/// payload: 22004.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
fn webhook_enqueue(
    source: Option<&str>,
    idem_key: Option<&str>,
    payload: Option<&[u8]>,
    event_type: default!(Option<&str>, "NULL"),
    headers: default!(Option<Jsonb>, "NULL"),
) -> String {
    let key = args::key(source, idem_key);
    let payload = required(payload, "payload");
    let fingerprint = crate::signature::ct::sha256(payload);
    spi::connected(|conn| enqueue_one(conn, key, payload, &fingerprint, None, event_type, headers, None))
        .as_str()
        .to_string()
}

/// One enqueue: the body of `webhook_enqueue` and of
/// `webhook_receive(mode => 'enqueue')`. A recent duplicate is answered
/// from the key's row without a write ([`unrecorded`]); otherwise one
/// statement stores a new key with its payload, or locks a known one and
/// counts the delivery; a conflicting payload is recorded with one more. A new key's delivery
/// and a conflicting one are archived when the source keeps payloads
/// (with `intake`'s event id and headers from `webhook_receive`, else
/// `headers`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn enqueue_one(
    conn: &Conn<'_>,
    key: Key<'_>,
    payload: &[u8],
    fingerprint: &[u8],
    raw: Option<&[u8]>,
    event_type: Option<&str>,
    headers: Option<Jsonb>,
    intake: Option<Intake<'_>>,
) -> Enqueued {
    store::visible_conflict(conn, key);
    let now = clock_now();
    let reconciled = intake.is_some_and(|i| i.reconciled);
    let delivery = Delivery { key, now, payload, fingerprint, event_type, headers, reconciled };
    let known = match unrecorded(conn, key, now, fingerprint, raw) {
        Some(found) => Upserted::Known(Box::new(found)),
        None => store::queue::enqueue(conn, &delivery),
    };
    let (outcome, counter, label) = match known {
        // a reconciled event never arrived as a delivery: counted apart
        Upserted::Inserted if reconciled => (Enqueued::Accepted, Counter::Reconciled, event_type.map(str::to_string)),
        Upserted::Inserted => (Enqueued::Accepted, Counter::Enqueued, event_type.map(str::to_string)),
        Upserted::Known(found) => {
            let given = crate::claim::same_bytes(found.fingerprint.as_deref(), Some(fingerprint), raw);
            let outcome = decide_enqueue(Some(&found.stored()), given.unwrap_or(fingerprint));
            let counter = match (outcome, found.state) {
                (Enqueued::Conflict, _) => {
                    let stored = found.fingerprint.as_deref().unwrap_or_default();
                    store::claim::record_conflict(conn, key, now, stored, fingerprint, Via::Enqueue);
                    Counter::Conflicts
                }
                (_, State::Completed) => Counter::DuplicatesOfCompleted,
                (_, _) => Counter::DuplicatesInProgress,
            };
            (outcome, counter, found.event_type)
        }
    };
    if matches!(outcome, Enqueued::Accepted | Enqueued::Conflict) {
        let conflict = outcome == Enqueued::Conflict;
        let (event_id, headers) = intake.map_or((None, headers), |i| (i.event_id, i.headers));
        super::archive::keep(
            conn,
            &Archived { key, received_at: now, event_id, event_type, conflict, payload, headers },
        );
    }
    metrics::count(key.source, label.as_deref(), counter, !reconciled);
    outcome
}

/// The row of `key` when this enqueue of a known key is answered from the
/// stored state without a write (a `duplicate` in any state, as
/// [`crate::claim::records_touch`] rules for a claim; issue 29): under READ
/// COMMITTED, from the version the latest snapshot sees, committed by
/// another transaction, found through the primary key without a plan
/// ([`crate::store::direct::Session::read_row`]). A key being inserted
/// right now is not visible yet: the upsert then waits for it. `None`:
/// the upsert statement, which stores a new key or locks and records a
/// known one.
fn unrecorded(
    conn: &Conn<'_>,
    key: Key<'_>,
    now: i64,
    fingerprint: &[u8],
    raw: Option<&[u8]>,
) -> Option<store::KeyRow> {
    let interval = super::claim::duplicate_read_interval()?;
    let mut session = store::direct::Session::open_to_look(conn, key.source)?;
    let read = session.read_row(key);
    session.close();
    let (found, last_seen_at) = read?;
    let given = crate::claim::same_bytes(found.fingerprint.as_deref(), Some(fingerprint), raw);
    let conflict = decide_enqueue(Some(&found.stored()), given.unwrap_or(fingerprint)) == Enqueued::Conflict;
    let recorded =
        Decision { outcome: if conflict { Outcome::Conflict } else { Outcome::Duplicate }, write: Write::Touch };
    (!claim::records_touch(recorded, found.fingerprint.is_none(), last_seen_at, now, interval)).then_some(found)
}

/// A recent duplicate enqueue of `key` answered from reads alone, before
/// any other statement of the call (`webhook_receive` in enqueue mode with
/// the replay guard, whose guard statement would lock and write): the
/// key's row read as [`unrecorded`] reads it, then `confirm` (the guard
/// names this key), then the delivery counted as [`enqueue_one`] counts a
/// duplicate. `None`: no such key, or a delivery that must be written;
/// nothing was counted.
pub(crate) fn read_answer(
    conn: &Conn<'_>,
    key: Key<'_>,
    fingerprint: &[u8],
    raw: Option<&[u8]>,
    confirm: impl FnOnce() -> bool,
) -> Option<Enqueued> {
    let found = unrecorded(conn, key, clock_now(), fingerprint, raw)?;
    if !confirm() {
        return None;
    }
    // unrecorded answers a duplicate only (a conflict is recorded)
    let counter =
        if found.state == State::Completed { Counter::DuplicatesOfCompleted } else { Counter::DuplicatesInProgress };
    metrics::count(key.source, found.event_type.as_deref(), counter, true);
    Some(Enqueued::Duplicate)
}

/// What `webhook_receive` (or `webhook_dedup.reconcile`) read of a delivery
/// it enqueues, for the archive and the metrics.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Intake<'a> {
    /// The provider's event id (None for a body key).
    pub event_id: Option<&'a str>,
    /// The request headers as given.
    pub headers: Option<Jsonb>,
    /// Enqueued by a reconciliation job (`webhook_dedup.reconcile`), not
    /// received as a delivery.
    pub reconciled: bool,
}

/// One row handed out by `webhook_next`.
type NextRow = (String, String, Uuid, i32, Option<Vec<u8>>, Option<String>, Option<String>, Option<Jsonb>);

/// Take up to `batch` due keys (of `source`, or of every source when
/// NULL), oldest first: `pending` keys, keys whose lease expired, and
/// failed keys whose retry is due. Each comes leased to the caller for
/// `lease` (NULL: the source's, else `webhook_dedup.default_lease`) with a
/// fresh `claim_token`, its `attempt`, the stored `payload` and `headers`,
/// its `event_type` and the `last_step` to resume from. A key that is due
/// again with no attempts left is dead-lettered instead of handed out.
///
/// Keys another worker or a claim holds right now are skipped, not waited
/// for (`FOR NO KEY UPDATE SKIP LOCKED`: a key's row lock is the only lock
/// any writer of the key takes, so skipping one never leaves a lock
/// behind). Two workers never get the same key. Finish each with
/// `webhook_complete` / `webhook_fail`.
///
/// Errors: 22004 NULL `batch`; 22023 `batch` outside 1..1000, a bad
/// `source` or `lease`; 40001 under REPEATABLE READ when a key changed after
/// the transaction's snapshot.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
#[allow(clippy::type_complexity)] // pgrx needs the column names inline
fn webhook_next(
    source: default!(Option<&str>, "NULL"),
    lease: default!(Option<Interval>, "NULL"),
    batch: default!(Option<i32>, 1),
) -> TableIterator<
    'static,
    (
        name!(source, String),
        name!(idem_key, String),
        name!(claim_token, Uuid),
        name!(attempt, i32),
        name!(payload, Option<Vec<u8>>),
        name!(event_type, Option<String>),
        name!(last_step, Option<String>),
        name!(headers, Option<Jsonb>),
    ),
> {
    let batch = required(batch, "batch");
    if !(1..=1000).contains(&batch) {
        Error::invalid(format!("batch must be between 1 and 1000, not {batch}")).raise();
    }
    if let Some(source) = source {
        crate::key::check_source(source).or_raise();
    }
    let lease_us = lease.map(args::lease);
    let mut counts: Vec<(String, Option<String>, Counter)> = Vec::new();
    let rows: Vec<NextRow> = spi::connected(|conn| {
        let now = clock_now();
        let mut out = Vec::with_capacity(batch as usize);
        // Keys of a paused source are set aside (parked) and the take is
        // repeated for the rest of the batch (the keys it set aside stay
        // locked by this transaction, so a repeated take skips them).
        for _ in 0..MAX_TAKES {
            let want = batch - out.len() as i32;
            let taken = store::queue::take_due(conn, now, source, want);
            let took = taken.len();
            let mut set_aside = 0;
            for found in taken {
                if !take_one(conn, now, lease_us, &found, &mut out, &mut counts) {
                    set_aside += 1;
                }
            }
            if set_aside == 0 || took < want as usize || out.len() >= batch as usize {
                break;
            }
        }
        out
    });
    for (source, event_type, counter) in &counts {
        metrics::count(source, event_type.as_deref(), *counter, false);
    }
    TableIterator::new(rows)
}

/// How many takes one `webhook_next` makes at most when keys of paused
/// sources fill its batches (each take skips the keys the earlier ones
/// set aside).
const MAX_TAKES: usize = 8;

/// What `webhook_next` does with one key it took locked: lease it (added to
/// `out`), dead-letter it, repair its due time, or, when its source is
/// paused, set it aside (false): a pending or failed key is parked
/// ([`claim::PAUSED_DUE_AT`]) until `webhook_dedup.resume`, a processing
/// key whose lease lapsed is left to maintenance, which makes it failed
/// (and the next take parks it).
fn take_one(
    conn: &Conn<'_>,
    now: i64,
    lease_us: Option<i64>,
    found: &store::KeyRow,
    out: &mut Vec<NextRow>,
    counts: &mut Vec<(String, Option<String>, Counter)>,
) -> bool {
    let key = found.key();
    let settings = sources::settings(conn, key.source);
    if settings.paused && !store::citus::keys_distributed() && sources::paused_locked(conn, key.source) {
        if matches!(found.state, State::Pending | State::Failed) {
            store::transitions::set_due(conn, key, Some(claim::PAUSED_DUE_AT));
        }
        return false;
    }
    match decide(Some(&found.stored()), now, None, settings.max_attempts()) {
        Decision { write: Write::Lease { attempt }, outcome } => {
            let store::queue::Queued { payload, headers, redacted } = store::queue::payload(conn, key);
            if payload.is_none() && redacted {
                // its deliveries were erased while it was in flight: there
                // is nothing to hand a worker
                store::queue::dead_letter_erased(conn, key);
                counts.push((found.source.clone(), found.event_type.clone(), Counter::DeadLetters));
                return true;
            }
            let token = store::new_token();
            let until = now.saturating_add(lease_us.unwrap_or_else(|| settings.default_lease_us()));
            store::claim::lease(conn, key, &Lease { now, attempt, token, until, event_type: None });
            counts.push((found.source.clone(), found.event_type.clone(), Counter::Drained));
            if outcome == Outcome::Reclaimed {
                counts.push((found.source.clone(), found.event_type.clone(), Counter::Reclaims));
            }
            out.push((
                found.source.clone(),
                found.idem_key.clone(),
                token,
                attempt,
                payload,
                found.event_type.clone(),
                found.last_step.clone(),
                headers,
            ));
        }
        Decision { write: Write::DeadLetter, .. } => {
            store::transitions::dead_letter_exhausted(conn, found, now);
            counts.push((found.source.clone(), found.event_type.clone(), Counter::DeadLetters));
        }
        _ => {
            // Not due after all: its due_at disagrees with its
            // state. Repair it so that it stops coming back at the
            // head of the queue.
            let due = claim::due_at(found.state, now, found.lease_expires_at, found.next_attempt_at);
            if due != found.due_at {
                store::transitions::set_due(conn, key, due);
            }
        }
    }
    true
}
