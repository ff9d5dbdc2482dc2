//! Persist-then-process: `webhook_enqueue` stores a delivery (the receiver
//! answers 200 at once), `webhook_next` hands due keys to workers with a
//! lease, and the workers finish them with the same `webhook_complete`,
//! `webhook_fail` and `webhook_checkpoint` as claim-and-process receivers.

use super::args;
use crate::engine;
use crate::engine::queue::Enqueue;
use crate::error::{required, Error, OrRaise, Raise};
use crate::jsonb::Jsonb;
use crate::spi;
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
    let content = engine::Content { fingerprint: Some(&fingerprint), raw: None };
    let enqueue = Enqueue { key, payload, content, event_type, headers, origin: None };
    spi::connected(|conn| engine::queue::enqueue(conn, &enqueue)).as_str().to_string()
}

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
    let rows = engine::queue::next(source, lease_us, batch);
    TableIterator::new(rows)
}
