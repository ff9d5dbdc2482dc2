//! The transitions after a claim: by the lease holder (`webhook_fail`,
//! `webhook_mark_unknown`, `webhook_checkpoint`, `webhook_extend_lease`),
//! and by an operator (`webhook_resolve`, `webhook_forget`); run by
//! [`crate::engine::transitions`].

use super::args;
use crate::claim::{self, State};
use crate::engine::transitions;
use crate::error::{required, Error, OrRaise, Raise};
use crate::jsonb::Jsonb;
use crate::time::duration_us;
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::Uuid;

/// Report that processing failed. Returns the new state: `failed` (due
/// again after `retry_after`, or after the backoff
/// `min(30 s * 2^(attempt - 1), 1 h)`) when `retryable` and the attempt is
/// below the source's `max_attempts` (`webhook_dedup.sources`, else
/// `webhook_dedup.max_attempts`); otherwise `dead_lettered`. NULL when
/// `claim_token` is stale (nothing changes). `error` is stored as
/// `last_error`. Unknown key: P0002; a `retry_after` outside 0..365 days
/// or with months: 22023.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
fn webhook_fail(
    source: Option<&str>,
    idem_key: Option<&str>,
    claim_token: Option<Uuid>,
    error: Option<&str>,
    retryable: default!(Option<bool>, true),
    retry_after: default!(Option<Interval>, "NULL"),
) -> Option<String> {
    let key = args::key(source, idem_key);
    let token = required(claim_token, "claim_token");
    let retryable = required(retryable, "retryable");
    let retry_after_us = retry_after.map(|r| duration_us(r, "retry_after").or_raise());
    if retry_after_us.is_some_and(|r| !(0..=claim::MAX_LEASE_US).contains(&r)) {
        Error::invalid("retry_after must be between 0 and 365 days").raise();
    }
    transitions::fail(key, token, retryable, retry_after_us, error).map(|state| state.as_str().to_string())
}

/// Report that the outcome is unknown: the holder may have reached an
/// external system and lost the answer, so retrying could act twice. The
/// key becomes `unknown_outcome` (with `detail` as `last_error`) and
/// nothing processes it until `webhook_resolve`. True when done; false when
/// `claim_token` is stale. Unknown key: P0002.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
fn webhook_mark_unknown(
    source: Option<&str>,
    idem_key: Option<&str>,
    claim_token: Option<Uuid>,
    detail: default!(Option<&str>, "NULL"),
) -> bool {
    let key = args::key(source, idem_key);
    let token = required(claim_token, "claim_token");
    transitions::mark_unknown(key, token, detail)
}

/// Record the last completed step, so that a delivery that reclaims the
/// key after a crash resumes there (`webhook_claim` returns it as
/// `last_step`). Checkpoint in the same transaction as the step's own
/// writes. True when done; false when `claim_token` is stale. Unknown key:
/// P0002; NULL or empty `step`: 22004/22023.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
fn webhook_checkpoint(
    source: Option<&str>,
    idem_key: Option<&str>,
    claim_token: Option<Uuid>,
    step: Option<&str>,
) -> bool {
    let key = args::key(source, idem_key);
    let token = required(claim_token, "claim_token");
    let step = required(step, "step");
    if step.is_empty() {
        Error::invalid("step must not be empty").raise();
    }
    transitions::checkpoint(key, token, step)
}

/// Extend the holder's lease to `lease` from now (for work that runs
/// longer than planned). Returns the new expiry; NULL when `claim_token` is
/// stale (the lease was reclaimed: stop working). Unknown key: P0002; a
/// lease that is not positive, over 365 days or has months: 22023.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
fn webhook_extend_lease(
    source: Option<&str>,
    idem_key: Option<&str>,
    claim_token: Option<Uuid>,
    lease: Option<Interval>,
) -> Option<TimestampWithTimeZone> {
    let key = args::key(source, idem_key);
    let token = required(claim_token, "claim_token");
    let lease_us = args::lease(required(lease, "lease"));
    transitions::extend_lease(key, token, lease_us).map(crate::time::timestamptz)
}

/// An operator's decision about a key, from any state: `completed` (it
/// was done after all; `result` is stored when given), `failed` (retry it
/// now), `dead_lettered` (give up), `pending` (hand it to the queue
/// again). A `processing` key's holder is fenced out (its token stops
/// working). Returns the previous state. Unknown key: P0002; another
/// `new_state`: 22023.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
fn webhook_resolve(
    source: Option<&str>,
    idem_key: Option<&str>,
    new_state: Option<&str>,
    result: default!(Option<Jsonb>, "NULL"),
) -> String {
    let key = args::key(source, idem_key);
    let new_state = required(new_state, "new_state");
    let to = State::parse(new_state)
        .ok_or_else(|| Error::invalid(format!("unknown state \"{new_state}\"")))
        .and_then(claim::check_resolve_target)
        .or_raise();
    transitions::resolve(key, to, result).as_str().to_string()
}

/// Remove a key, so that a deliberate replay of its event is processed
/// again. For operators; counted as `forgotten` in the metrics. Returns
/// true when the key existed.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
fn webhook_forget(source: Option<&str>, idem_key: Option<&str>) -> bool {
    let key = args::key(source, idem_key);
    transitions::forget(key)
}
