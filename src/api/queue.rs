//! Persist-then-process: `webhook_enqueue` stores a delivery (the receiver
//! answers 200 at once), `webhook_next` hands due keys to workers with a
//! lease, and the workers finish them with the same `webhook_complete`,
//! `webhook_fail` and `webhook_checkpoint` as claim-and-process receivers.

use super::claim::{touch, LEASE};
use super::protocol::{expect_one, key_args, lease_arg, lock_key, lookup, new_token, try_lock_key};
use crate::claim::{decide, decide_enqueue, Enqueued, Write};
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
    &[
        TEXTOID,
        TEXTOID,
        TIMESTAMPTZOID,
        BYTEAOID,
        BYTEAOID,
        TEXTOID,
        JSONBOID,
    ],
);
static CANDIDATES: Statement = Statement::new(
    crate::sql_statement!("queue_candidates.sql"),
    &[TIMESTAMPTZOID, TEXTOID, INT4OID],
);
static PAYLOAD: Statement = Statement::new(
    crate::sql_statement!("queue_payload.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID],
);

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
                touch(
                    conn,
                    (source, idem_key),
                    now,
                    &found,
                    Some(&fingerprint),
                    conflict,
                    "enqueue",
                );
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
    outcome.as_str().to_string()
}

/// One row handed out by `webhook_next`.
type NextRow = (
    String,
    String,
    Uuid,
    i32,
    Option<Vec<u8>>,
    Option<String>,
    Option<String>,
    Option<Jsonb>,
);

/// Take up to `batch` due keys (of `source`, or of every source when
/// NULL), oldest first: `pending` keys, keys whose lease expired, and
/// failed keys whose retry is due. Each comes leased to the caller for
/// `lease` (NULL: the source's, else `webhook_dedup.default_lease`) with a
/// fresh `claim_token`, its `attempt`, the stored `payload` and `headers`,
/// its `event_type` and the `last_step` to resume from. Rows another
/// worker is taking are skipped (`FOR UPDATE SKIP LOCKED`, and the key
/// locks), so two workers never get the same key. Finish each with
/// `webhook_complete` / `webhook_fail`. `batch` must be 1..1000 (22023).
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
    let now = clock_now();
    let rows: Vec<NextRow> = spi::connected(|conn| {
        let candidates = conn.execute(
            &CANDIDATES,
            &[arg(timestamptz(now)), arg(source), arg(batch)],
            Snap::Statement,
        );
        let keys: Vec<(String, String)> = (0..candidates.len())
            .map(|i| {
                (
                    candidates.get(i, 1).expect("source"),
                    candidates.get(i, 2).expect("idem_key"),
                )
            })
            .collect();
        let mut out = Vec::with_capacity(keys.len());
        for (source, idem_key) in keys {
            // A key whose lock is held is being claimed right now: skip it.
            if !try_lock_key(&source, &idem_key) {
                continue;
            }
            let (Some(found), settings) = lookup(conn, &source, &idem_key) else {
                continue;
            };
            let Write::Lease { attempt } = decide(Some(&found.stored), now, None).write else {
                continue;
            };
            let token = new_token();
            let lease_until = timestamptz(
                now.saturating_add(lease_us.unwrap_or_else(|| settings.default_lease_us())),
            );
            expect_one(conn.execute(
                &LEASE,
                &[
                    arg(source.as_str()),
                    arg(idem_key.as_str()),
                    arg(timestamptz(now)),
                    arg(attempt),
                    arg(token),
                    arg(lease_until),
                    arg(None::<&[u8]>),
                    arg(None::<&str>),
                    arg(found.partition_at),
                    arg(0),
                ],
                Snap::Statement,
            ));
            let stored = conn.execute(
                &PAYLOAD,
                &[
                    arg(source.as_str()),
                    arg(idem_key.as_str()),
                    arg(found.partition_at),
                ],
                Snap::Statement,
            );
            let payload: Option<Vec<u8>> = stored.get(0, 1);
            let headers = stored.get_jsonb(0, 2);
            out.push((
                source,
                idem_key,
                token,
                attempt,
                payload,
                found.event_type,
                found.last_step,
                headers,
            ));
        }
        out
    });
    for row in &rows {
        metrics::count(&row.0, row.5.as_deref(), Counter::Drained, false);
    }
    TableIterator::new(rows)
}
