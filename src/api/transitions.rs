//! The transitions after a claim: by the lease holder (`webhook_fail`,
//! `webhook_mark_unknown`, `webhook_checkpoint`, `webhook_extend_lease`),
//! and by an operator (`webhook_resolve`, `webhook_forget`). Every one
//! follows the lock protocol of [`super::protocol`]; the rules are in
//! [`crate::claim`].

use super::protocol::{existing, expect_one, key_args, lease_arg, lock_key, lookup, Row, SourceSettings};
use crate::claim::{self, FailTo, State};
use crate::error::{required, Error, OrRaise};
use crate::jsonb::Jsonb;
use crate::metrics::{self, Counter};
use crate::spi::{self, arg, Conn, Snap, Statement};
use crate::time::{clock_now, duration_us, timestamptz};
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::pg_sys::{INT4OID, JSONBOID, TEXTOID, TIMESTAMPTZOID};
use pgrx::prelude::*;
use pgrx::Uuid;

pub(crate) static FAIL: Statement = Statement::new(
    crate::sql_statement!("key_fail.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, INT4OID],
);

/// Dead-letter a key that is due again with no attempts left (its holders
/// kept dying without calling `webhook_fail`); `delivery` when a claim
/// found it (it counts as one of the key's deliveries).
pub(crate) fn dead_letter_exhausted(
    conn: &Conn<'_>,
    (source, idem_key): (&str, &str),
    now: i64,
    found: &Row,
    delivery: bool,
) {
    let error = format!("due again after attempt {}, the last allowed: dead-lettered", found.stored.attempt);
    expect_one(conn.execute(
        &FAIL,
        &[
            arg(source),
            arg(idem_key),
            arg(timestamptz(now)),
            arg(None::<TimestampWithTimeZone>),
            arg(State::DeadLettered.as_str()),
            arg(error.as_str()),
            arg(found.partition_at),
            arg(i32::from(delivery)),
        ],
        Snap::Statement,
    ));
}

static MARK_UNKNOWN: Statement = Statement::new(
    crate::sql_statement!("key_mark_unknown.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID],
);
static CHECKPOINT: Statement = Statement::new(
    crate::sql_statement!("key_checkpoint.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID],
);
static EXTEND: Statement = Statement::new(
    crate::sql_statement!("key_extend_lease.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID],
);
static RESOLVE: Statement = Statement::new(
    crate::sql_statement!("key_resolve.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, TIMESTAMPTZOID],
);
static FORGET: Statement = Statement::new(crate::sql_statement!("key_forget.sql"), &[TEXTOID, TEXTOID, TIMESTAMPTZOID]);

/// A call by the holder of `token`: lock the key, read it (P0002 when
/// unknown) and run `body` only if `token` holds its lease. `None` (and a
/// `stale_tokens` count) when it does not: nothing changes.
fn as_holder<R>(
    (source, idem_key): (&str, &str),
    token: Uuid,
    body: impl FnOnce(&Conn<'_>, &Row, &SourceSettings, i64) -> (R, Option<Counter>),
) -> Option<R> {
    lock_key(source, idem_key);
    let now = clock_now();
    let (result, counter, label) = spi::connected(|conn| {
        let (found, settings) = lookup(conn, source, idem_key);
        let found = existing(found, source, idem_key);
        if !found.held_by(&token) {
            return (None, Some(Counter::StaleTokens), found.event_type);
        }
        let (result, counter) = body(conn, &found, &settings, now);
        (Some(result), counter, found.event_type)
    });
    if let Some(counter) = counter {
        metrics::count(source, label.as_deref(), counter, false);
    }
    result
}

/// Report that processing failed. Returns the new state: `failed` (due
/// again after `retry_after`, or after the backoff
/// `min(30 s * 2^(attempt - 1), 1 h)`) when `retryable` and the attempt is
/// below the source's `max_attempts` (`webhook_dedup.sources`, else
/// `webhook_dedup.max_attempts`); otherwise `dead_lettered`. NULL when
/// `claim_token` is stale (nothing changes). `error` is stored as
/// `last_error`. Unknown key: P0002; a `retry_after` outside 0..365 days
/// or with months: 22023.
#[pg_extern(volatile, parallel_unsafe)]
fn webhook_fail(
    source: Option<&str>,
    idem_key: Option<&str>,
    claim_token: Option<Uuid>,
    error: Option<&str>,
    retryable: default!(Option<bool>, true),
    retry_after: default!(Option<Interval>, "NULL"),
) -> Option<String> {
    let key = key_args(source, idem_key);
    let token = required(claim_token, "claim_token");
    let retryable = required(retryable, "retryable");
    let retry_after_us = retry_after.map(|r| duration_us(r, "retry_after").or_raise());
    if retry_after_us.is_some_and(|r| !(0..=claim::MAX_LEASE_US).contains(&r)) {
        Error::invalid("retry_after must be between 0 and 365 days").raise();
    }
    as_holder(key, token, |conn, found, settings, now| {
        let to = claim::decide_fail(found.stored.attempt, retryable, retry_after_us, settings.max_attempts(), now);
        let (state, next, counter) = match to {
            FailTo::Failed { next_attempt_at } => (State::Failed, Some(next_attempt_at), Counter::RetriesScheduled),
            FailTo::DeadLettered => (State::DeadLettered, None, Counter::DeadLetters),
        };
        expect_one(conn.execute(
            &FAIL,
            &[
                arg(key.0),
                arg(key.1),
                arg(timestamptz(now)),
                arg(next.map(timestamptz)),
                arg(state.as_str()),
                arg(error),
                arg(found.partition_at),
                arg(0),
            ],
            Snap::Statement,
        ));
        (state.as_str().to_string(), Some(counter))
    })
}

/// Report that the outcome is unknown: the holder may have reached an
/// external system and lost the answer, so retrying could act twice. The
/// key becomes `unknown_outcome` (with `detail` as `last_error`) and
/// nothing processes it until `webhook_resolve`. True when done; false when
/// `claim_token` is stale. Unknown key: P0002.
#[pg_extern(volatile, parallel_unsafe)]
fn webhook_mark_unknown(
    source: Option<&str>,
    idem_key: Option<&str>,
    claim_token: Option<Uuid>,
    detail: default!(Option<&str>, "NULL"),
) -> bool {
    let key = key_args(source, idem_key);
    let token = required(claim_token, "claim_token");
    as_holder(key, token, |conn, found, _, now| {
        expect_one(conn.execute(
            &MARK_UNKNOWN,
            &[arg(key.0), arg(key.1), arg(timestamptz(now)), arg(detail), arg(found.partition_at)],
            Snap::Statement,
        ));
        ((), Some(Counter::MarkedUnknown))
    })
    .is_some()
}

/// Record the last completed step, so that a delivery that reclaims the
/// key after a crash resumes there (`webhook_claim` returns it as
/// `last_step`). Checkpoint in the same transaction as the step's own
/// writes. True when done; false when `claim_token` is stale. Unknown key:
/// P0002; NULL or empty `step`: 22004/22023.
#[pg_extern(volatile, parallel_unsafe)]
fn webhook_checkpoint(
    source: Option<&str>,
    idem_key: Option<&str>,
    claim_token: Option<Uuid>,
    step: Option<&str>,
) -> bool {
    let key = key_args(source, idem_key);
    let token = required(claim_token, "claim_token");
    let step = required(step, "step");
    if step.is_empty() {
        Error::invalid("step must not be empty").raise();
    }
    as_holder(key, token, |conn, found, _, now| {
        expect_one(conn.execute(
            &CHECKPOINT,
            &[arg(key.0), arg(key.1), arg(timestamptz(now)), arg(step), arg(found.partition_at)],
            Snap::Statement,
        ));
        ((), None)
    })
    .is_some()
}

/// Extend the holder's lease to `lease` from now (for work that runs
/// longer than planned). Returns the new expiry; NULL when `claim_token` is
/// stale (the lease was reclaimed: stop working). Unknown key: P0002; a
/// lease that is not positive, over 365 days or has months: 22023.
#[pg_extern(volatile, parallel_unsafe)]
fn webhook_extend_lease(
    source: Option<&str>,
    idem_key: Option<&str>,
    claim_token: Option<Uuid>,
    lease: Option<Interval>,
) -> Option<TimestampWithTimeZone> {
    let key = key_args(source, idem_key);
    let token = required(claim_token, "claim_token");
    let lease_us = lease_arg(required(lease, "lease"));
    as_holder(key, token, |conn, found, _, now| {
        let until = timestamptz(now.saturating_add(lease_us));
        expect_one(conn.execute(
            &EXTEND,
            &[arg(key.0), arg(key.1), arg(timestamptz(now)), arg(until), arg(found.partition_at)],
            Snap::Statement,
        ));
        (until, None)
    })
}

/// An operator's decision about a key, from any state: `completed` (it
/// was done after all; `result` is stored when given), `failed` (retry it
/// now), `dead_lettered` (give up), `pending` (hand it to the queue
/// again). A `processing` key's holder is fenced out (its token stops
/// working). Returns the previous state. Unknown key: P0002; another
/// `new_state`: 22023.
#[pg_extern(volatile, parallel_unsafe)]
fn webhook_resolve(
    source: Option<&str>,
    idem_key: Option<&str>,
    new_state: Option<&str>,
    result: default!(Option<Jsonb>, "NULL"),
) -> String {
    let (source, idem_key) = key_args(source, idem_key);
    let new_state = required(new_state, "new_state");
    let to = State::parse(new_state)
        .ok_or_else(|| Error::invalid(format!("unknown state \"{new_state}\"")))
        .and_then(claim::check_resolve_target)
        .or_raise();
    lock_key(source, idem_key);
    let now = clock_now();
    let (previous, label) = spi::connected(|conn| {
        let found = existing(lookup(conn, source, idem_key).0, source, idem_key);
        let due = matches!(to, State::Failed | State::Pending).then(|| timestamptz(now));
        expect_one(conn.execute(
            &RESOLVE,
            &[
                arg(source),
                arg(idem_key),
                arg(timestamptz(now)),
                arg(to.as_str()),
                arg(result),
                arg(due),
                arg(found.partition_at),
            ],
            Snap::Statement,
        ));
        (found.stored.state, found.event_type)
    });
    metrics::count(source, label.as_deref(), Counter::Resolved, false);
    if to == State::DeadLettered && previous != State::DeadLettered {
        metrics::count(source, label.as_deref(), Counter::DeadLetters, false);
    }
    previous.as_str().to_string()
}

/// Remove a key, so that a deliberate replay of its event is processed
/// again. For operators; counted as `forgotten` in the metrics. Returns
/// true when the key existed.
#[pg_extern(volatile, parallel_unsafe)]
fn webhook_forget(source: Option<&str>, idem_key: Option<&str>) -> bool {
    let (source, idem_key) = key_args(source, idem_key);
    lock_key(source, idem_key);
    let label = spi::connected(|conn| {
        let found = lookup(conn, source, idem_key).0?;
        expect_one(conn.execute(&FORGET, &[arg(source), arg(idem_key), arg(found.partition_at)], Snap::Statement));
        Some(found.event_type)
    });
    match label {
        Some(label) => {
            metrics::count(source, label.as_deref(), Counter::Forgotten, false);
            true
        }
        None => false,
    }
}
