//! Persist-then-process: `webhook_enqueue` stores a delivery (the receiver
//! answers 200 at once), `webhook_next` hands due keys to workers with a
//! lease, and the workers finish them with the same `webhook_complete`,
//! `webhook_fail` and `webhook_checkpoint` as claim-and-process receivers.

use super::claim::{touch, LEASE};
use super::protocol::{expect_one, key_args, lease_arg, lock_key, lookup, new_token, try_lock_key, unlock_key};
use super::transitions::dead_letter_exhausted;
use crate::claim::{self, decide, decide_enqueue, Decision, Enqueued, Outcome, Write};
use crate::error::{required, Error, OrRaise};
use crate::jsonb::Jsonb;
use crate::metrics::{self, Counter};
use crate::spi::{self, arg, Snap, Statement};
use crate::time::{clock_now, timestamptz};
use pgrx::datum::Interval;
use pgrx::pg_sys::{BYTEAOID, INT4OID, JSONBOID, TEXTOID, TIMESTAMPTZOID};
use pgrx::prelude::*;
use pgrx::Uuid;
use sha2::{Digest, Sha256};

static ENQUEUE: Statement = Statement::new(
    crate::sql_statement!("queue_enqueue.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, BYTEAOID, BYTEAOID, TEXTOID, JSONBOID],
);
static CANDIDATES: Statement =
    Statement::new(crate::sql_statement!("queue_candidates.sql"), &[TIMESTAMPTZOID, TEXTOID, INT4OID]);
static SET_DUE: Statement =
    Statement::new(crate::sql_statement!("key_set_due.sql"), &[TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID]);
static PAYLOAD: Statement =
    Statement::new(crate::sql_statement!("queue_payload.sql"), &[TEXTOID, TEXTOID, TIMESTAMPTZOID]);

/// Store a delivery for the workers: `accepted` (a new key, now `pending`
/// with its raw `payload` and optional `headers`), `duplicate` (the key is
/// known, in any state: nothing stored) or `conflict` (known with another
/// payload: recorded in `webhook_dedup.conflicts`, nothing stored). Answer
/// the provider 2xx for all three. Key rules as `webhook_claim`; NULL
/// payload: 22004.
#[pg_extern(volatile, parallel_unsafe)]
fn webhook_enqueue(
    source: Option<&str>,
    idem_key: Option<&str>,
    payload: Option<&[u8]>,
    event_type: default!(Option<&str>, "NULL"),
    headers: default!(Option<Jsonb>, "NULL"),
) -> String {
    let (source, idem_key) = key_args(source, idem_key);
    let payload = required(payload, "payload");
    enqueue_one(source, idem_key, payload, event_type, headers).as_str().to_string()
}

/// One enqueue, under the lock protocol: the body of `webhook_enqueue` and
/// of `webhook_receive(mode => 'enqueue')`.
pub(crate) fn enqueue_one(
    source: &str,
    idem_key: &str,
    payload: &[u8],
    event_type: Option<&str>,
    headers: Option<Jsonb>,
) -> Enqueued {
    let fingerprint = Sha256::digest(payload).to_vec();
    lock_key(source, idem_key);
    let now = clock_now();
    let (outcome, counter, label) = spi::connected(|conn| {
        let (found, _) = lookup(conn, source, idem_key);
        let outcome = decide_enqueue(found.as_ref().map(|r| &r.stored), &fingerprint);
        match found {
            None => {
                conn.execute(
                    &ENQUEUE,
                    &[
                        arg(source),
                        arg(idem_key),
                        arg(timestamptz(now)),
                        arg(payload),
                        arg(fingerprint.as_slice()),
                        arg(event_type),
                        arg(headers),
                    ],
                    Snap::Statement,
                );
                (outcome, Counter::Enqueued, event_type.map(str::to_string))
            }
            Some(found) => {
                let conflict = outcome == Enqueued::Conflict;
                touch(conn, (source, idem_key), now, &found, Some(&fingerprint), conflict, "enqueue");
                let counter = match (conflict, found.stored.state) {
                    (true, _) => Counter::Conflicts,
                    (false, crate::claim::State::Completed) => Counter::DuplicatesOfCompleted,
                    (false, _) => Counter::DuplicatesInProgress,
                };
                (outcome, counter, found.event_type)
            }
        }
    });
    metrics::count(source, label.as_deref(), counter, true);
    outcome
}

/// One row handed out by `webhook_next`.
type NextRow = (String, String, Uuid, i32, Option<Vec<u8>>, Option<String>, Option<String>, Option<Jsonb>);

/// How many candidates `webhook_next` reads for a batch: some slack for
/// keys other workers or claims are taking right now.
fn candidate_limit(batch: i32) -> i32 {
    (batch * 4 + 16).min(4_000)
}

/// Take up to `batch` due keys (of `source`, or of every source when
/// NULL), oldest first: `pending` keys, keys whose lease expired, and
/// failed keys whose retry is due. Each comes leased to the caller for
/// `lease` (NULL: the source's, else `webhook_dedup.default_lease`) with a
/// fresh `claim_token`, its `attempt`, the stored `payload` and `headers`,
/// its `event_type` and the `last_step` to resume from. A key that is due
/// again with no attempts left is dead-lettered instead of handed out.
///
/// Keys another worker or a claim is taking right now are skipped, not
/// waited for: each candidate's key lock is *tried* before its row is read
/// or locked, in the same order as every other writer of a key. (A plain
/// `FOR UPDATE SKIP LOCKED` would lock rows before their key locks and keep
/// the locks of skipped rows until the caller's transaction ends, which can
/// deadlock with a claim; the tried key lock gives the same skip-don't-wait
/// behaviour without that.) Two workers never get the same key. Finish each
/// with `webhook_complete` / `webhook_fail`.
///
/// Errors: 22004 NULL `batch`; 22023 `batch` outside 1..1000, a bad
/// `source` or `lease`; 40001 under REPEATABLE READ when a key changed after
/// the transaction's snapshot.
#[pg_extern(volatile, parallel_unsafe)]
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
        crate::key::check_bounded("source", source).or_raise();
    }
    let lease_us = lease.map(lease_arg);
    let mut counts: Vec<(String, Option<String>, Counter)> = Vec::new();
    let rows: Vec<NextRow> = spi::connected(|conn| {
        let candidates = conn.execute(
            &CANDIDATES,
            &[arg(timestamptz(clock_now())), arg(source), arg(candidate_limit(batch))],
            Snap::Latest,
        );
        let keys: Vec<(String, String)> = (0..candidates.len())
            .map(|i| (candidates.get(i, 1).expect("source"), candidates.get(i, 2).expect("idem_key")))
            .collect();
        let mut out = Vec::with_capacity(batch as usize);
        for (source, idem_key) in keys {
            if out.len() == batch as usize {
                break;
            }
            // A key whose lock is held is being claimed or worked right now: skip it.
            if !try_lock_key(&source, &idem_key) {
                continue;
            }
            let key = (source.as_str(), idem_key.as_str());
            let now = clock_now();
            let (found, settings) = lookup(conn, key.0, key.1);
            let Some(found) = found else {
                unlock_key(key.0, key.1);
                continue;
            };
            match decide(Some(&found.stored), now, None, settings.max_attempts()) {
                Decision { write: Write::Lease { attempt }, outcome } => {
                    let token = new_token();
                    let until = now.saturating_add(lease_us.unwrap_or_else(|| settings.default_lease_us()));
                    let until = timestamptz(until);
                    expect_one(conn.execute(
                        &LEASE,
                        &[
                            arg(key.0),
                            arg(key.1),
                            arg(timestamptz(now)),
                            arg(attempt),
                            arg(token),
                            arg(until),
                            arg(None::<&[u8]>),
                            arg(None::<&str>),
                            arg(found.partition_at),
                            arg(0),
                        ],
                        Snap::Statement,
                    ));
                    let stored =
                        conn.execute(&PAYLOAD, &[arg(key.0), arg(key.1), arg(found.partition_at)], Snap::Statement);
                    let payload: Option<Vec<u8>> = stored.get(0, 1);
                    let headers = stored.get_jsonb(0, 2);
                    counts.push((source.clone(), found.event_type.clone(), Counter::Drained));
                    if outcome == Outcome::Reclaimed {
                        counts.push((source.clone(), found.event_type.clone(), Counter::Reclaims));
                    }
                    out.push((
                        source.clone(),
                        idem_key.clone(),
                        token,
                        attempt,
                        payload,
                        found.event_type,
                        found.last_step,
                        headers,
                    ));
                }
                Decision { write: Write::DeadLetter, .. } => {
                    dead_letter_exhausted(conn, key, now, &found, false);
                    counts.push((source.clone(), found.event_type.clone(), Counter::DeadLetters));
                }
                _ => {
                    // Not due after all (the candidate read raced a change).
                    // If its due_at says otherwise, repair it so that it
                    // stops coming back at the head of the queue.
                    let s = &found.stored;
                    let due = claim::due_at(s.state, now, s.lease_expires_at, s.next_attempt_at);
                    if found.due_at.is_some_and(|d| d <= now) && due != found.due_at {
                        expect_one(conn.execute(
                            &SET_DUE,
                            &[arg(key.0), arg(key.1), arg(due.map(timestamptz)), arg(found.partition_at)],
                            Snap::Statement,
                        ));
                    }
                    unlock_key(key.0, key.1);
                }
            }
        }
        out
    });
    for (source, event_type, counter) in &counts {
        metrics::count(source, event_type.as_deref(), *counter, false);
    }
    TableIterator::new(rows)
}
