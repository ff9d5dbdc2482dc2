//! The queue's paths: a delivery stored for the workers ([`enqueue`],
//! `webhook_enqueue` and `webhook_receive(mode => 'enqueue')`) and due keys
//! handed to them ([`next`], `webhook_next`), over the state machine's
//! decisions ([`crate::claim`]) and the store's statements.

use super::Content;
use crate::answer::Kind;
use crate::claim::{self, decide, decide_enqueue, Decision, Enqueued, Outcome, State, Write};
use crate::jsonb::Jsonb;
use crate::metrics::{self, Counter};
use crate::spi::{self, Conn};
use crate::store::archive::Archived;
use crate::store::claim::{Lease, Via};
use crate::store::queue::Delivery;
use crate::store::{self, sources, Key, Upserted};
use crate::time::clock_now;
use pgrx::Uuid;

/// A delivery to store for the workers.
#[derive(Clone, Copy)]
pub struct Enqueue<'a> {
    pub key: Key<'a>,
    /// The raw body, stored for the workers (and archived).
    pub payload: &'a [u8],
    /// Its fingerprint (always given: an enqueue has a payload).
    pub content: Content<'a>,
    pub event_type: Option<&'a str>,
    /// The headers to store with it (`webhook_enqueue`'s).
    pub headers: Option<Jsonb>,
    /// What `webhook_receive` or `reconcile` read of it.
    pub origin: Option<Origin<'a>>,
}

/// The answer kind of an enqueue's outcome (`crate::answer`).
pub fn kind(outcome: Enqueued) -> Kind {
    match outcome {
        Enqueued::Accepted => Kind::Accepted,
        Enqueued::Duplicate => Kind::Claim(Outcome::Duplicate),
        Enqueued::Conflict => Kind::Claim(Outcome::Conflict),
    }
}

/// One enqueue: the body of `webhook_enqueue` and of
/// `webhook_receive(mode => 'enqueue')`. A recent duplicate is answered
/// from the key's row without a write ([`unrecorded`]); otherwise one
/// statement stores a new key with its payload, or locks a known one and
/// counts the delivery; a conflicting payload is recorded with one more. A new key's delivery
/// and a conflicting one are archived when the source keeps payloads
/// (with `origin`'s event id and headers from `webhook_receive`, else
/// `headers`).
pub fn enqueue(conn: &Conn<'_>, e: &Enqueue<'_>) -> Enqueued {
    let Enqueue { key, payload, content, event_type, headers, origin } = *e;
    let (fingerprint, raw) = (content.fingerprint.expect("an enqueue has a payload"), content.raw);
    store::visible_conflict(conn, key);
    let now = clock_now();
    let reconciled = origin.is_some_and(|o| o.reconciled);
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
        let (event_id, headers) = origin.map_or((None, headers), |o| (o.event_id, o.headers));
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
/// [`crate::claim::records_touch`] rules for a claim): under READ
/// COMMITTED, from the version the latest snapshot sees, committed by
/// another transaction, found through the primary key without a plan
/// ([`crate::store::direct_writes::Session::read_row`]). A key being inserted
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
    let mut session = store::direct_writes::Session::open_to_look(conn, key.source)?;
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
/// names this key), then the delivery counted as [`enqueue`] counts a
/// duplicate. `None`: no such key, or a delivery that must be written;
/// nothing was counted.
pub fn read_answer(
    conn: &Conn<'_>,
    key: Key<'_>,
    content: Content<'_>,
    confirm: impl FnOnce() -> bool,
) -> Option<Enqueued> {
    let fingerprint = content.fingerprint.expect("an enqueue has a payload");
    let found = unrecorded(conn, key, clock_now(), fingerprint, content.raw)?;
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
pub struct Origin<'a> {
    /// The provider's event id (None for a body key).
    pub event_id: Option<&'a str>,
    /// The request headers as given.
    pub headers: Option<Jsonb>,
    /// Enqueued by a reconciliation job (`webhook_dedup.reconcile`), not
    /// received as a delivery.
    pub reconciled: bool,
}

/// One row handed out by `webhook_next`.
pub type NextRow = (String, String, Uuid, i32, Option<Vec<u8>>, Option<String>, Option<String>, Option<Jsonb>);

/// `webhook_next`: take up to `batch` due keys (of `source`, or of every
/// source), each leased for `lease_us` (None: the source's lease), oldest
/// first; keys of a paused source set aside, keys out of attempts
/// dead-lettered. The counts are made once the statements ran.
pub fn next(source: Option<&str>, lease_us: Option<i64>, batch: i32) -> Vec<NextRow> {
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
    rows
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
    if settings.paused && sources::paused_locked(conn, key.source) {
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
