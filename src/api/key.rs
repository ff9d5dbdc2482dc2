//! `webhook_key`: scoped, bounded idempotency keys (rules in [`crate::key`]).

use crate::error::{required, OrRaise};
use crate::key::{derive, Parts};
use pgrx::prelude::*;

/// The idempotency key for one event of one source, optionally scoped by
/// environment, account and operation: `source:event_id`, or
/// `source:environment:account:event_id:operation` when any optional part
/// is given (absent parts are empty fields). At most 255 characters;
/// deterministic and injective. NULL `source` or `event_id` is 22004;
/// empty parts are 22023.
#[pg_extern(immutable, parallel_safe)]
fn webhook_key(
    source: Option<&str>,
    event_id: Option<&str>,
    environment: default!(Option<&str>, "NULL"),
    account: default!(Option<&str>, "NULL"),
    operation: default!(Option<&str>, "NULL"),
) -> String {
    let source = required(source, "source");
    let event_id = required(event_id, "event_id");
    derive(&Parts {
        source,
        event_id,
        environment,
        account,
        operation,
    })
    .or_raise()
}
