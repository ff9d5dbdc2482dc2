//! `webhook_claim` and `webhook_complete`: the claim-and-process path.
//! [`crate::claim`] decides; [`super::protocol`] locks and reads; this
//! file writes.

use super::protocol::{existing, expect_one, key_args, lease_arg, lock_key, lookup, new_token, Row};
use super::transitions::dead_letter_exhausted;
use crate::claim::{decide, Outcome, State, Write};
use crate::error::required;
use crate::jsonb::Jsonb;
use crate::metrics::{self, Counter};
use crate::spi::{self, arg, Conn, Snap, Statement};
use crate::time::{clock_now, timestamptz};
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::pg_sys::{BYTEAOID, INT4OID, JSONBOID, TEXTOID, TIMESTAMPTZOID, UUIDOID};
use pgrx::prelude::*;
use pgrx::Uuid;
use sha2::{Digest, Sha256};

static INSERT: Statement = Statement::new(
    crate::sql_statement!("claim_insert.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, UUIDOID, TIMESTAMPTZOID, BYTEAOID, TEXTOID],
);

pub(crate) static LEASE: Statement = Statement::new(
    crate::sql_statement!("claim_lease.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, INT4OID, UUIDOID, TIMESTAMPTZOID, BYTEAOID, TEXTOID, TIMESTAMPTZOID, INT4OID],
);

pub(crate) static TOUCH: Statement = Statement::new(
    crate::sql_statement!("claim_touch.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, INT4OID, BYTEAOID, TIMESTAMPTZOID],
);

static COMPLETE: Statement = Statement::new(
    crate::sql_statement!("claim_complete.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, JSONBOID, TIMESTAMPTZOID],
);

static CONFLICT: Statement = Statement::new(
    crate::sql_statement!("conflict_record.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, BYTEAOID, BYTEAOID, TEXTOID],
);

/// Count a delivery of a stored key that changes no state, and record it
/// in `webhook_dedup.conflicts` when its payload differs.
pub(crate) fn touch(
    conn: &Conn<'_>,
    (source, idem_key): (&str, &str),
    now: i64,
    found: &Row,
    fingerprint: Option<&[u8]>,
    conflict: bool,
    via: &str,
) {
    let now_ts = timestamptz(now);
    expect_one(conn.execute(
        &TOUCH,
        &[arg(source), arg(idem_key), arg(now_ts), arg(i32::from(conflict)), arg(fingerprint), arg(found.partition_at)],
        Snap::Statement,
    ));
    if conflict {
        conn.execute(
            &CONFLICT,
            &[
                arg(source),
                arg(idem_key),
                arg(now_ts),
                arg(found.stored.fingerprint.as_deref()),
                arg(fingerprint),
                arg(via),
            ],
            Snap::Statement,
        );
    }
}

/// One output row of `webhook_claim` (the column names are in its signature).
pub(crate) type ClaimRow = (
    String,
    Option<Uuid>,
    i32,
    String,
    Option<Jsonb>,
    Option<String>,
    TimestampWithTimeZone,
    Option<TimestampWithTimeZone>,
);

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
/// the database clock (`clock_timestamp()`) after the key's lock is taken.
#[pg_extern(volatile, parallel_unsafe)]
#[allow(clippy::type_complexity)] // pgrx needs the column names inline
fn webhook_claim(
    source: Option<&str>,
    idem_key: Option<&str>,
    payload: default!(Option<&[u8]>, "NULL"),
    lease: default!(Option<Interval>, "NULL"),
    event_type: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
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
    let (source, idem_key) = key_args(source, idem_key);
    let lease_us = lease.map(lease_arg);
    let fingerprint: Option<Vec<u8>> = payload.map(|p| Sha256::digest(p).to_vec());
    TableIterator::once(claim_one(source, idem_key, fingerprint.as_deref(), lease_us, event_type))
}

/// One claim, under the lock protocol: the body of `webhook_claim` and of
/// each key of `webhook_claim_many`.
pub(crate) fn claim_one(
    source: &str,
    idem_key: &str,
    fingerprint: Option<&[u8]>,
    lease_us: Option<i64>,
    event_type: Option<&str>,
) -> ClaimRow {
    lock_key(source, idem_key);
    let now = clock_now();
    let (row, outcome, write, label) = spi::connected(|conn| {
        let (found, settings) = lookup(conn, source, idem_key);
        let decision = decide(found.as_ref().map(|r| &r.stored), now, fingerprint, settings.max_attempts());
        let label = found.as_ref().and_then(|r| r.event_type.clone()).or(event_type.map(str::to_string));
        let now_ts = timestamptz(now);
        let lease_until = timestamptz(now.saturating_add(lease_us.unwrap_or_else(|| settings.default_lease_us())));
        let processing = State::Processing.as_str().to_string();
        let outcome = decision.outcome.as_str().to_string();
        let row: ClaimRow = match (decision.write, found) {
            (Write::Insert, _) => {
                let token = new_token();
                conn.execute(
                    &INSERT,
                    &[
                        arg(source),
                        arg(idem_key),
                        arg(now_ts),
                        arg(token),
                        arg(lease_until),
                        arg(fingerprint),
                        arg(event_type),
                    ],
                    Snap::Statement,
                );
                (outcome, Some(token), 1, processing, None, None, now_ts, Some(lease_until))
            }
            (Write::Lease { attempt }, Some(found)) => {
                let token = new_token();
                expect_one(conn.execute(
                    &LEASE,
                    &[
                        arg(source),
                        arg(idem_key),
                        arg(now_ts),
                        arg(attempt),
                        arg(token),
                        arg(lease_until),
                        arg(fingerprint),
                        arg(event_type),
                        arg(found.partition_at),
                        arg(1),
                    ],
                    Snap::Statement,
                ));
                let Row { result, last_step, first_seen_at, .. } = found;
                (outcome, Some(token), attempt, processing, result, last_step, first_seen_at, Some(lease_until))
            }
            (Write::Touch, Some(found)) => {
                let conflict = decision.outcome == Outcome::Conflict;
                touch(conn, (source, idem_key), now, &found, fingerprint, conflict, "claim");
                // A conflicting delivery never sees what the other payload's
                // holder stored.
                let (result, last_step) = if conflict { (None, None) } else { (found.result, found.last_step) };
                (
                    outcome,
                    None,
                    found.stored.attempt,
                    found.stored.state.as_str().into(),
                    result,
                    last_step,
                    found.first_seen_at,
                    found.stored.lease_expires_at.map(timestamptz),
                )
            }
            (Write::DeadLetter, Some(found)) => {
                dead_letter_exhausted(conn, (source, idem_key), now, &found, true);
                (
                    outcome,
                    None,
                    found.stored.attempt,
                    State::DeadLettered.as_str().into(),
                    None,
                    found.last_step,
                    found.first_seen_at,
                    None,
                )
            }
            (write, None) => unreachable!("decision {write:?} needs a stored row"),
        };
        (row, decision.outcome, decision.write, label)
    });
    metrics::count(source, label.as_deref(), Counter::for_outcome(outcome), true);
    if write == Write::DeadLetter {
        metrics::count(source, label.as_deref(), Counter::DeadLetters, false);
    }
    row
}

/// Claim several keys of one source in one call, for a delivery that
/// carries several events. The keys are claimed one by one in sorted order
/// (duplicates once), so two transactions claiming overlapping keys in any
/// order never deadlock: the second waits for the first's keys and then
/// sees them `in_progress` (or completed). One row per distinct key, with
/// the columns of `webhook_claim` and the key first. Payload fingerprints
/// are not compared here (use `webhook_claim` per key for that). Errors as
/// `webhook_claim`, for the source and every key; 22004 for a NULL key.
#[pg_extern(volatile, parallel_unsafe)]
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
        .map(|k| k.unwrap_or_else(|| crate::error::Error::NullValue { what: "every element of idem_keys" }.raise()))
        .collect();
    keys.sort();
    keys.dedup();
    let lease_us = lease.map(lease_arg);
    let rows: Vec<_> = keys
        .iter()
        .map(|k| {
            let (source, idem_key) = key_args(source, Some(k));
            let (o, t, a, st, r, l, f, e) = claim_one(source, idem_key, None, lease_us, event_type);
            (k.clone(), o, t, a, st, r, l, f, e)
        })
        .collect();
    TableIterator::new(rows)
}

/// Complete a claimed key: stores `result` (returned to later duplicates)
/// and marks the key `completed`. Returns true when `claim_token` held the
/// key's lease; false, changing nothing, when the token is stale (the
/// lease was reclaimed by another delivery, or the key is no longer
/// `processing`). An unknown key is P0002. Fencing is by token, not by
/// clock: a holder whose lease expired but was not reclaimed (nor swept by
/// maintenance, which moves it to `failed`) still completes.
#[pg_extern(volatile, parallel_unsafe)]
fn webhook_complete(
    source: Option<&str>,
    idem_key: Option<&str>,
    claim_token: Option<Uuid>,
    result: default!(Option<Jsonb>, "NULL"),
) -> bool {
    let (source, idem_key) = key_args(source, idem_key);
    let token = required(claim_token, "claim_token");
    lock_key(source, idem_key);
    let now = clock_now();
    let (done, label) = spi::connected(|conn| {
        let found = existing(lookup(conn, source, idem_key).0, source, idem_key);
        if !found.held_by(&token) {
            return (false, found.event_type);
        }
        expect_one(conn.execute(
            &COMPLETE,
            &[arg(source), arg(idem_key), arg(timestamptz(now)), arg(result), arg(found.partition_at)],
            Snap::Statement,
        ));
        (true, found.event_type)
    });
    let counter = if done { Counter::Completions } else { Counter::StaleCompletions };
    metrics::count(source, label.as_deref(), counter, false);
    done
}
