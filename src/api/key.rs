//! `webhook_key` and `webhook_body_key`: scoped, bounded idempotency keys
//! (rules in [`crate::key`]).

use crate::error::{required, OrRaise};
use crate::key::{body_hash_field, derive, Parts};
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
