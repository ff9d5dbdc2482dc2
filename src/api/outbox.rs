//! The transactional outbox's SQL surface (`docs/outbox.md`): a key's
//! holder writes intents (`webhook_outbox_put`) in its own transaction;
//! senders take them (`webhook_outbox_next`) and report (`_ack`, `_fail`,
//! `_unknown`); operators resolve parked ones (`webhook_outbox_resolve`).
//! Run by [`crate::engine::outbox`].

use super::args;
use crate::claim::{self, State};
use crate::engine;
use crate::error::{required, Error, OrRaise, Raise};
use crate::jsonb::Jsonb;
use crate::operation_key;
use crate::outbox;
use crate::spi;
use crate::store::outbox::Intent;
use crate::time::{clock_now, duration_us, timestamptz};
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::Uuid;

/// The outbox runs on one server; on a distributed install its intents
/// would have to live with their keys' shards, which is not built yet.
fn check_not_distributed() {
    super::args::one_server_only("the outbox", "docs/outbox.md, \"Limits\".");
}

/// Record a downstream call to make, while holding the key's lease: a new
/// intent of `operation` (`refund`, `email:receipt`; one per downstream
/// effect of the event) for the senders of `target` (`stripe-refunds`,
/// `email`), with the `request` they need, and its downstream idempotency
/// key `webhook_operation_key(source, idem_key, operation, max_length,
/// downstream)`. Written in the caller's transaction: it commits or
/// vanishes with the business write and `webhook_complete`. Returns the
/// intent's id; the id of the operation's first intent when it has one
/// (nothing is written again: the guides' `sent_notifications` guard);
/// NULL when `claim_token` does not hold the key's lease (a stale holder
/// writes nothing; counted as `stale_tokens`).
///
/// `downstream_idempotent => false` for a downstream that takes no
/// idempotency key (most e-mail APIs): an intent whose sender's lease
/// lapses is then parked as `unknown_outcome` instead of being sent again.
///
/// Errors: P0002 unknown key; 22004 a NULL argument; 22023 the key's
/// rules, an `operation` or `target` of 0 or over 255 characters, a bad
/// `max_length` or `downstream` (as `webhook_operation_key`); 0A000 on a
/// distributed install.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
#[allow(clippy::too_many_arguments)] // the SQL signature
fn webhook_outbox_put(
    source: Option<&str>,
    idem_key: Option<&str>,
    claim_token: Option<Uuid>,
    operation: Option<&str>,
    target: Option<&str>,
    request: Option<Jsonb>,
    max_length: default!(Option<i32>, 255),
    downstream: default!(Option<&str>, "NULL"),
    downstream_idempotent: default!(Option<bool>, true),
) -> Option<i64> {
    let key = args::key(source, idem_key);
    let claim_token = required(claim_token, "claim_token");
    let operation = required(operation, "operation");
    let target = required(target, "target");
    let request = required(request, "request");
    let max_length = required(max_length, "max_length");
    let downstream_idempotent = required(downstream_idempotent, "downstream_idempotent");
    outbox::check_names(operation, target).or_raise();
    let limit = operation_key::limit(max_length, downstream).or_raise();
    let downstream_key = operation_key::operation_key(key.source, key.idem_key, operation, limit).or_raise();
    check_not_distributed();
    spi::connected(|conn| {
        let intent = Intent {
            key,
            claim_token,
            operation,
            target,
            request,
            downstream_key: &downstream_key,
            downstream_idempotent,
            now: clock_now(),
        };
        engine::outbox::put(conn, &intent)
    })
}

/// Take up to `batch` due intents (of `target`, or of every target when
/// NULL), oldest due first: pending ones, ones whose sender's lease
/// lapsed, failed ones whose retry is due. Each comes leased to the caller
/// for `lease` (NULL: its source's lease, else `webhook_dedup.default_lease`)
/// with a fresh `lease_token`, its `attempt` and its `downstream_key` to
/// send. An intent due again with no attempts left is dead-lettered; a
/// lapsed lease of a downstream that is not idempotent is parked as
/// `unknown_outcome`; neither is handed out. Intents another sender holds
/// are skipped, not waited for: two senders never get the same intent.
/// Finish each with `webhook_outbox_ack`, `_fail` or `_unknown`.
///
/// Errors: 22004 NULL `batch`; 22023 `batch` outside 1..1000, a bad
/// `target` or `lease`; 0A000 on a distributed install.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
#[allow(clippy::type_complexity)] // pgrx needs the column names inline
fn webhook_outbox_next(
    target: default!(Option<&str>, "NULL"),
    lease: default!(Option<Interval>, "NULL"),
    batch: default!(Option<i32>, 1),
) -> TableIterator<
    'static,
    (
        name!(id, i64),
        name!(lease_token, Uuid),
        name!(downstream_key, String),
        name!(target, String),
        name!(operation, String),
        name!(request, Option<Jsonb>),
        name!(attempt, i32),
        name!(lease_expires_at, TimestampWithTimeZone),
        name!(source, String),
        name!(idem_key, String),
        name!(downstream_idempotent, bool),
    ),
> {
    let batch = outbox::check_batch(required(batch, "batch")).or_raise();
    if let Some(target) = target {
        crate::key::check_bounded("target", target).or_raise();
    }
    let lease_us = lease.map(args::lease);
    check_not_distributed();
    let rows = engine::outbox::next(target, lease_us, batch);
    TableIterator::new(rows.into_iter().map(
        |(id, token, key, target, op, request, attempt, until, source, idem, idempotent)| {
            (id, token, key, target, op, request, attempt, timestamptz(until), source, idem, idempotent)
        },
    ))
}

/// The intent was delivered: it becomes `completed`, with the downstream's
/// `response` kept, and is deleted after its source's retention. True when
/// `lease_token` holds its lease; false (nothing changes; counted as
/// `stale_tokens`) when it does not: another sender took it after this
/// lease lapsed, or an operator resolved it. Errors: P0002 unknown intent;
/// 22004 NULL `id` or `lease_token`; 0A000 on a distributed install.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
fn webhook_outbox_ack(id: Option<i64>, lease_token: Option<Uuid>, response: default!(Option<Jsonb>, "NULL")) -> bool {
    let id = required(id, "id");
    let token = required(lease_token, "lease_token");
    check_not_distributed();
    engine::outbox::ack(id, token, response)
}

/// The call failed and had no effect (the downstream answered an error,
/// the connection was refused). Returns the new state: `failed` (due again
/// after `retry_after`, else after `min(30 s * 2^(attempt - 1), 1 h)`)
/// while `retryable` and the attempt is below the source's
/// `max_attempts`; otherwise `dead_lettered`. NULL when `lease_token` is
/// stale (nothing changes). `error` is kept as `last_error`. A call whose
/// effect is unknown (a timeout after sending) is not a failure: use
/// `webhook_outbox_unknown`, or retry only a downstream that deduplicates
/// by the intent's key. Errors: P0002 unknown intent; 22004 NULL `id`,
/// `lease_token` or `retryable`; 22023 a `retry_after` outside 0..365 days
/// or with months; 0A000 on a distributed install.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
fn webhook_outbox_fail(
    id: Option<i64>,
    lease_token: Option<Uuid>,
    error: Option<&str>,
    retryable: default!(Option<bool>, true),
    retry_after: default!(Option<Interval>, "NULL"),
) -> Option<String> {
    let id = required(id, "id");
    let token = required(lease_token, "lease_token");
    let retryable = required(retryable, "retryable");
    let retry_after_us = retry_after.map(|r| duration_us(r, "retry_after").or_raise());
    if retry_after_us.is_some_and(|r| !(0..=claim::MAX_LEASE_US).contains(&r)) {
        Error::invalid("retry_after must be between 0 and 365 days").raise();
    }
    check_not_distributed();
    engine::outbox::fail(id, token, retryable, retry_after_us, error).map(|state| state.as_str().to_string())
}

/// The call was sent and its answer lost (a timeout, a crash of the
/// connection after the request went out), and the downstream cannot be
/// asked to deduplicate a repeat: the intent becomes `unknown_outcome`
/// (`detail` kept as `last_error`) and is never sent again automatically;
/// an operator reconciles it with the downstream and resolves it
/// (`webhook_outbox_resolve`). True when done; false when `lease_token` is
/// stale. Errors: P0002 unknown intent; 22004 NULL `id` or `lease_token`;
/// 0A000 on a distributed install.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
fn webhook_outbox_unknown(id: Option<i64>, lease_token: Option<Uuid>, detail: default!(Option<&str>, "NULL")) -> bool {
    let id = required(id, "id");
    let token = required(lease_token, "lease_token");
    check_not_distributed();
    engine::outbox::unknown(id, token, detail)
}

/// An operator's decision about an intent, from any state (after
/// reconciling it with the downstream): `completed` (it was delivered
/// after all; `response` stored when given), `failed` (send it again now),
/// `dead_lettered` (give up), `pending` (send it again now, as a new
/// intent would be); sent again, its attempts start over
/// ([`outbox::attempt_after_resolve`]). Never `processing` or
/// `unknown_outcome`. A sender
/// holding the intent is fenced out (its token stops working). Returns
/// the previous state. Errors: P0002 unknown intent; 22004 NULL `id` or
/// `new_state`; 22023 another `new_state`; 0A000 on a distributed install.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
fn webhook_outbox_resolve(
    id: Option<i64>,
    new_state: Option<&str>,
    response: default!(Option<Jsonb>, "NULL"),
) -> String {
    let id = required(id, "id");
    let new_state = required(new_state, "new_state");
    let to = State::parse(new_state)
        .ok_or_else(|| Error::invalid(format!("unknown state \"{new_state}\"")))
        .and_then(claim::check_resolve_target)
        .or_raise();
    check_not_distributed();
    engine::outbox::resolve(id, to, response).as_str().to_string()
}
