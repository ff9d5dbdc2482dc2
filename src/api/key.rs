//! `webhook_key` and `webhook_body_key`: scoped, bounded idempotency keys
//! (rules in [`crate::key`]).

use crate::error::{required, OrRaise};
use crate::key::{body_hash_field, derive, Parts};
use crate::operation_key;
use pgrx::prelude::*;

/// The idempotency key for one event of one source, optionally scoped by
/// environment, account and operation: `source:event_id`, or
/// `source:environment:account:event_id:operation` when any optional part
/// is given (absent parts are empty fields). At most 255 characters;
/// deterministic and injective. Not strict (the optional parts default to
/// NULL): NULL `source` or `event_id` is 22004; empty parts are 22023.
#[pg_extern(immutable, parallel_safe, schema = "webhook_dedup")]
fn webhook_key(
    source: Option<&str>,
    event_id: Option<&str>,
    environment: default!(Option<&str>, "NULL"),
    account: default!(Option<&str>, "NULL"),
    operation: default!(Option<&str>, "NULL"),
) -> String {
    let source = required(source, "source");
    let event_id = required(event_id, "event_id");
    derive(&Parts { source, event_id, environment, account, operation, body_hash: false }).or_raise()
}

/// The key of an event that carries no event id: SHA-256 over the raw
/// `payload` exactly as received (`%b` and 64 hex digits where the event id
/// goes), scoped like `webhook_key`. Wrong when two distinct events have
/// byte-identical bodies (they become one key), and when the provider
/// re-serialises a retry (it becomes a new key): use an event id whenever
/// the provider sends one. NULL `source` or `payload` is 22004; empty parts
/// are 22023.
#[pg_extern(immutable, parallel_safe, schema = "webhook_dedup")]
fn webhook_body_key(
    source: Option<&str>,
    payload: Option<&[u8]>,
    environment: default!(Option<&str>, "NULL"),
    account: default!(Option<&str>, "NULL"),
    operation: default!(Option<&str>, "NULL"),
) -> String {
    let source = required(source, "source");
    let field = body_hash_field(required(payload, "payload"));
    derive(&Parts { source, event_id: &field, environment, account, operation, body_hash: true }).or_raise()
}

/// The downstream idempotency key of `operation` for the event `idem_key`
/// of `source` (rules in [`crate::operation_key`]): the key a receiver
/// sends with its own call to a payment, shipping or e-mail API, the same
/// on every retry, reclaim, replica and after a dump and restore, distinct
/// for every (event, operation), at most `max_length` characters of
/// `A-Z a-z 0-9 - . _ % :`. `downstream` names a preset whose limit
/// replaces `max_length` (`webhook_dedup.downstream_key_limits`).
///
/// Errors: 22004 NULL `source`, `idem_key`, `operation` or `max_length`;
/// 22023 an empty part, a part over 255 characters, a `max_length` outside
/// 32..255, an unknown `downstream`, or a `max_length` other than 255 (the
/// default) given with a `downstream` whose limit differs.
#[pg_extern(immutable, parallel_safe, schema = "webhook_dedup")]
fn webhook_operation_key(
    source: Option<&str>,
    idem_key: Option<&str>,
    operation: Option<&str>,
    max_length: default!(Option<i32>, 255),
    downstream: default!(Option<&str>, "NULL"),
) -> String {
    let source = required(source, "source");
    let idem_key = required(idem_key, "idem_key");
    let operation = required(operation, "operation");
    let max_length = required(max_length, "max_length");
    let limit = operation_key::limit(max_length, downstream).or_raise();
    operation_key::operation_key(source, idem_key, operation, limit).or_raise()
}

/// The presets of `webhook_operation_key(..., downstream => ...)`, one row
/// each; the view `webhook_dedup.downstream_key_limits` shows them.
#[pg_extern(immutable, parallel_safe, schema = "webhook_dedup")]
fn downstream_key_limits_rows() -> TableIterator<
    'static,
    (
        name!(downstream, String),
        name!(carrier, String),
        name!(max_length, i32),
        name!(key_retention, String),
        name!(sources, String),
    ),
> {
    TableIterator::new(operation_key::DOWNSTREAMS.iter().map(|d| {
        (d.name.to_string(), d.carrier.to_string(), d.max_length as i32, d.retention.to_string(), d.sources.to_string())
    }))
}
