//! `webhook_receive`: the whole intake in one round trip (verify, derive
//! the key from the provider's profile, claim or enqueue): its arguments
//! converted into a [`Request`], the intake run by
//! [`crate::engine::receive`], its row built.

use super::args::{self, HmacArgs};
use crate::answer::{self, Mode};
use crate::engine::receive::{receive, Answer, Request};
use crate::error::{required, Error, OrRaise, Raise};
use crate::jsonb::Jsonb;
use crate::profile;
use crate::signature::Scheme;
use crate::spi;
use crate::time::{clock_now, micros, timestamptz};
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::IntoDatum;

/// The whole intake of one delivery in one call, returning one row:
///
/// 1. **verify** the signature as `webhook_verify` does; a delivery that does
///    not verify gets `verified = false` and `reject_reason` (the reason of
///    `webhook_verify_detail`), and **nothing at all is written**: an
///    unauthenticated request never reserves or poisons a key (it is only
///    counted, in memory, as a signature rejection of `source` by reason);
/// 2. **answer a handshake** (Slack's `url_verification`, ...:
///    `crate::handshake`): `outcome = 'handshake'`, the JSON body to answer
///    with in `response`, nothing stored;
/// 3. **read the delivery** by the scheme's profile (`webhook_dedup.providers`)
///    with the source's own settings in its place (`webhook_dedup.sources`:
///    `event_id_from`, ..., `crate::intake`); an event type the source does
///    not accept (`accept_event_types`) is `outcome = 'ignored'`, nothing
///    stored, counted as `ignored`; a header the id, type or time is read
///    from that was sent more than once gets `verified = true`,
///    `reject_reason = 'repeated_header'` (400, nothing written, counted
///    with `missing_event_ids`): which value is the provider's cannot be
///    told (docs/signatures.md, "Repeated headers");
/// 4. **derive the key**: `webhook_key(source, <event id>, environment,
///    account, operation)`, `source` defaulting to the scheme's name. A
///    delivery without an event id gets `verified = true`,
///    `reject_reason = 'missing_event_id'` and no outcome, unless
///    `body_key_fallback` asks for `webhook_body_key`;
/// 5. **guard against replays** where the source's replay guard is on
///    (github, shopify, linear and twilio by default, and a source whose
///    `event_id_from` is a header its scheme does not sign: the id is
///    unsigned; `crate::intake::SourceIntake::apply`): a signed body (for
///    twilio, its canonical signed text) already received under another
///    event id is answered from
///    that key (`duplicate` with its result, `in_progress`,
///    `unknown_outcome`, `dead_lettered`; `idem_key` names that key) and
///    processes nothing (`crate::store::replay_guards`);
/// 6. **claim** it (`mode => 'claim'`: the columns of `webhook_claim`) or
///    **store** it for the workers (`mode => 'enqueue'`: `outcome` is
///    `accepted`, `duplicate` or `conflict`), with the fingerprint of the
///    source's rule (`fingerprint_pointers`, else the profile's: the raw
///    body, or for Stripe the RFC 8785 canonical JSON of `/type` and
///    `/data`, so a retry that Stripe re-rendered is no conflict, or for
///    Twilio the signed text).
///
/// Between 1 and 2, a scheme whose signature covers nothing of the body
/// (Mailgun) binds its signed token to the bytes it first arrived with
/// (`crate::store::signature_tokens`): the token on other bytes is a
/// copied signature block, answered `verified = false`,
/// `reject_reason = 'token_reused'`, and nothing else is written. Stored
/// keys verify only the scheme `add_secret` accepted them for.
///
/// `tolerance` NULL means the source's `webhook_dedup.sources.tolerance`,
/// else the provider's default window. `event_type` and `event_time` are
/// read as in step 3 (`event_time` is NULL when absent or malformed);
/// `last_step` is where a reclaim resumes; `response` is set only for a
/// handshake. Arguments and errors as `webhook_verify` and `webhook_claim`;
/// 22023 for another `mode`, and for a `webhook_dedup.sources` row whose
/// intake settings do not check.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
#[allow(clippy::too_many_arguments)]
fn webhook_receive(
    scheme: Option<&str>,
    payload: Option<&[u8]>,
    headers: Option<Jsonb>,
    secrets: default!(Option<pgrx::datum::Array<'_, &str>>, "NULL"),
    source: default!(Option<&str>, "NULL"),
    environment: default!(Option<&str>, "NULL"),
    account: default!(Option<&str>, "NULL"),
    operation: default!(Option<&str>, "NULL"),
    mode: default!(Option<&str>, "'claim'"),
    lease: default!(Option<Interval>, "NULL"),
    body_key_fallback: default!(Option<bool>, false),
    tolerance: default!(Option<Interval>, "NULL"),
    at: default!(Option<TimestampWithTimeZone>, "now()"),
    url: default!(Option<&str>, "NULL"),
    signature_header: default!(Option<&str>, "NULL"),
    signature_prefix: default!(Option<&str>, "NULL"),
    algorithm: default!(Option<&str>, "NULL"),
    encoding: default!(Option<&str>, "NULL"),
    method: default!(Option<&str>, "NULL"),
    wait: default!(Option<Interval>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> pgrx::composite_type!('static, "webhook_dedup.receive_result") {
    // Every argument is checked before anything is read or written.
    let scheme = Scheme::parse(required(scheme, "scheme")).or_raise();
    let body = required(payload, "payload");
    let mode = Mode::parse(required(mode, "mode")).or_raise();
    let body_key_fallback = required(body_key_fallback, "body_key_fallback");
    let source = source.unwrap_or(scheme.name());
    crate::key::check_source(source).or_raise();
    let request = Request {
        scheme,
        body,
        headers: args::header_map(headers),
        given_headers: headers,
        // NULL: the source's keys in webhook_dedup.source_secrets
        secrets: secrets.as_ref().map(|a| a.iter().collect()),
        source,
        environment,
        account,
        operation,
        mode,
        lease_us: lease.map(args::lease),
        body_key_fallback,
        tolerance_us: tolerance.map(|t| crate::time::duration_us(t, "tolerance").or_raise()),
        at_us: micros(required(at, "at"), "at").or_raise(),
        url,
        method,
        hmac: HmacArgs { header: signature_header, prefix: signature_prefix, algorithm, encoding }
            .spec(scheme)
            .or_raise(),
        wait_us: wait.map(check_wait),
    };
    // One SPI connection for the whole intake (the source's settings and
    // keys, the guard, the claim or enqueue): a connection per step would
    // cost each its own set-up.
    let answer = spi::connected(|conn| receive(conn, request));
    row(answer, mode, scheme, fcinfo)
}

/// The row of `webhook_dedup.receive_result` for `answer` (its columns, in
/// order), with the HTTP answer of [`crate::answer`].
fn row(
    mut a: Answer,
    mode: Mode,
    scheme: Scheme,
    fcinfo: pg_sys::FunctionCallInfo,
) -> pgrx::composite_type!('static, "webhook_dedup.receive_result") {
    let kind = a.kind();
    let retry_after = answer::seconds_until(a.retry_at, clock_now());
    let reply = answer::reply(kind, mode, profile::profile(scheme), retry_after).or_raise();
    let (status, headers, response) = super::rows::http_row(&reply, kind, a.result.as_ref(), a.response.take());
    super::rows::one_row(
        fcinfo,
        [
            a.verified.into_datum(),
            a.rejection.map(|r| r.as_str()).into_datum(),
            a.idem_key.into_datum(),
            a.outcome.map(|k| k.name()).into_datum(),
            a.claim_token.into_datum(),
            a.attempt.into_datum(),
            a.result.into_datum(),
            a.event_type.into_datum(),
            a.event_time.map(timestamptz).into_datum(),
            a.last_step.into_datum(),
            response.into_datum(),
            a.secret_index.into_datum(),
            status.into_datum(),
            headers.into_datum(),
        ],
    )
}

/// The longest `wait`: no provider documents a longer response deadline
/// than this, and each waiting call holds a database connection.
const MAX_WAIT_US: i64 = 60 * 1_000_000;

/// `wait` in microseconds: 22023 unless between 0 and 60 seconds without
/// months.
fn check_wait(wait: Interval) -> i64 {
    let us = crate::time::duration_us(wait, "wait").or_raise();
    if !(0..=MAX_WAIT_US).contains(&us) {
        Error::invalid("wait must be between 0 and 60 seconds").raise();
    }
    us
}
