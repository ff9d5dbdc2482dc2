//! `webhook_dedup.http_answer`: the HTTP answer of [`crate::answer`] for
//! an outcome named by the caller (a receiver that claims with
//! `webhook_claim`, or one whose work ended in a lost lease);
//! `webhook_receive` returns the same with every row.

use super::rows::http_row;
use crate::answer::{self, Kind, Mode};
use crate::error::{required, OrRaise, Raise};
use crate::jsonb::Jsonb;
use crate::profile;
use crate::signature::Scheme;
use pgrx::datum::Interval;
use pgrx::prelude::*;

/// The HTTP answer to a delivery: `http_status`, `http_headers` (a JSON
/// object of header names and string values, `Content-Type` always) and
/// `response` (the JSON body), for
///
/// - `outcome`: an outcome of `webhook_claim` or `webhook_receive`
///   (`claimed`, `reclaimed`, `in_progress`, `duplicate`, `conflict`,
///   `retry_later`, `unknown_outcome`, `dead_lettered`, `accepted`,
///   `handshake`, `ignored`), a refusal (`rejected`: a signature that did
///   not verify; `missing_event_id`; `refused_handshake`), or what became
///   of the work (`completed`: `webhook_complete` returned true;
///   `lease_lost`: it, or `webhook_checkpoint`, returned false; `error`:
///   the database could not be asked);
/// - `scheme`: the provider, whose profile (`webhook_dedup.providers`)
///   gives its stop signal and busy status (NULL or `hmac`: none);
/// - `result`: the body of `duplicate` and `completed` (the stored
///   result), and of `handshake`; `{"status": <outcome>}` when NULL;
/// - `retry_after`: how long until a retry can succeed, sent as
///   `Retry-After` (whole seconds, rounded up, at least 1) with a busy
///   answer; NULL sends none;
/// - `mode`: `claim` or `enqueue`, as `webhook_receive`'s.
///
/// The rules and their sources are in `crate::answer` and
/// docs/providers.md. Changes nothing; every role may call it. 22004 for
/// a NULL outcome or mode; 22023 for an unknown outcome, scheme or mode,
/// an outcome the mode never ends in, or a negative `retry_after` (or one
/// with months).
#[pg_extern(immutable, parallel_safe, schema = "webhook_dedup")]
#[allow(clippy::type_complexity)] // pgrx needs the column names inline
fn http_answer(
    outcome: Option<&str>,
    scheme: default!(Option<&str>, "NULL"),
    result: default!(Option<Jsonb>, "NULL"),
    retry_after: default!(Option<Interval>, "NULL"),
    mode: default!(Option<&str>, "'claim'"),
) -> TableIterator<'static, (name!(http_status, i32), name!(http_headers, Jsonb), name!(response, Option<Jsonb>))> {
    let kind = Kind::parse(required(outcome, "outcome")).or_raise();
    let mode = Mode::parse(required(mode, "mode")).or_raise();
    let profile = match scheme {
        Some(name) => profile::profile(Scheme::parse(name).or_raise()),
        None => None,
    };
    let retry_after_s = retry_after.map(|r| {
        let us = crate::time::duration_us(r, "retry_after").or_raise();
        if us < 0 {
            crate::error::Error::invalid("retry_after must not be negative").raise();
        }
        answer::seconds_until(Some(us), 0).expect("a time")
    });
    let reply = answer::reply(kind, mode, profile, retry_after_s).or_raise();
    let handshake = (kind == Kind::Handshake).then_some(result).flatten();
    TableIterator::once(http_row(&reply, kind, result.as_ref(), handshake))
}
