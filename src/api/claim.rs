//! `webhook_claim`, `webhook_claim_many` and `webhook_complete`: the
//! claim-and-process path. [`crate::engine::claim`] runs it.

use super::args;
use crate::engine::claim::{self, Claim};
use crate::engine::Content;
use crate::error::{required, Error, Raise};
use crate::jsonb::Jsonb;
use crate::spi;
use crate::store::archive::Archived;
use crate::time::timestamptz;
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::{IntoDatum, Uuid};

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
    let content = Content { fingerprint: fingerprint.as_ref().map(<[u8; 32]>::as_slice), raw: None };
    let row = spi::connected(|conn| {
        let row = claim::claim(conn, &Claim { key, content, lease_us, event_type, settings: None });
        if let (Some(payload), Some(conflict)) = (payload, row.archived_as()) {
            crate::engine::archive::keep(
                conn,
                &Archived { key, received_at: row.at, event_id: None, event_type, conflict, payload, headers: None },
            );
        }
        row
    });
    super::rows::one_row(
        fcinfo,
        [
            row.outcome.as_str().into_datum(),
            row.token.into_datum(),
            row.attempt.into_datum(),
            row.state.as_str().into_datum(),
            row.result.into_datum(),
            row.last_step.into_datum(),
            timestamptz(row.first_seen_at).into_datum(),
            row.lease_expires_at.map(timestamptz).into_datum(),
        ],
    )
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
                let r = claim::claim(
                    conn,
                    &Claim { key, content: Content::default(), lease_us, event_type, settings: None },
                );
                (
                    k.clone(),
                    r.outcome.as_str().to_string(),
                    r.token,
                    r.attempt,
                    r.state.as_str().to_string(),
                    r.result,
                    r.last_step,
                    timestamptz(r.first_seen_at),
                    r.lease_expires_at.map(timestamptz),
                )
            })
            .collect()
    });
    TableIterator::new(rows)
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
    spi::connected(|conn| claim::complete(conn, key, token, result))
}
