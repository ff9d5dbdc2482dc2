//! `webhook_receive`: the whole intake in one round trip (verify, derive
//! the key from the provider's profile, claim or enqueue), and
//! `webhook_dedup.provider_profiles()`, the profiles as rows.

use super::args;
use super::claim::claim_one;
use super::queue::enqueue_one;
use super::verify::{header_map, verify_sql, HmacArgs};
use crate::error::{required, Error, OrRaise};
use crate::jsonb::Jsonb;
use crate::key::{body_hash_field, check_bounded, derive, Parts};
use crate::metrics::{self, Counter};
use crate::profile::{self, Body, Extracted};
use crate::signature::Scheme;
use crate::spi;
use crate::store::{sources, Key};
use crate::time::timestamptz;
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::{IntoDatum, Uuid};

/// What `webhook_receive` does once a delivery verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Claim it (claim-and-process receivers).
    Claim,
    /// Store it for `webhook_next` (persist-then-process receivers).
    Enqueue,
}

impl Mode {
    fn parse(text: &str) -> Result<Mode, Error> {
        match text {
            "claim" => Ok(Mode::Claim),
            "enqueue" => Ok(Mode::Enqueue),
            other => Err(Error::invalid(format!("mode must be claim or enqueue, not \"{other}\""))),
        }
    }
}

/// One output row of `webhook_receive`.
type ReceiveRow = (
    bool,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<Uuid>,
    Option<i32>,
    Option<Jsonb>,
    Option<String>,
    Option<TimestampWithTimeZone>,
    Option<String>,
);

/// The row of `webhook_dedup.receive_result`.
fn receive_row(
    fcinfo: pg_sys::FunctionCallInfo,
    row: ReceiveRow,
) -> pgrx::composite_type!('static, "webhook_dedup.receive_result") {
    let (verified, reject_reason, idem_key, outcome, token, attempt, result, event_type, event_time, last_step) = row;
    super::rows::one_row(
        fcinfo,
        [
            verified.into_datum(),
            reject_reason.into_datum(),
            idem_key.into_datum(),
            outcome.into_datum(),
            token.into_datum(),
            attempt.into_datum(),
            result.into_datum(),
            event_type.into_datum(),
            event_time.into_datum(),
            last_step.into_datum(),
        ],
    )
}

/// The whole intake of one delivery in one call, returning one row:
///
/// 1. **verify** the signature as `webhook_verify` does; a delivery that does
///    not verify gets `verified = false` and `reject_reason` (the reason of
///    `webhook_verify_detail`), and **nothing at all is written**: an
///    unauthenticated request never reserves or poisons a key (it is only
///    counted, in memory, as a signature rejection of `source` by reason);
/// 2. **derive the key** from the scheme's profile (`webhook_dedup.providers`):
///    `webhook_key(source, <event id>, environment, account, operation)`,
///    `source` defaulting to the scheme's name. A delivery without an event
///    id gets `verified = true`, `reject_reason = 'missing_event_id'` and no
///    outcome, unless `body_key_fallback` asks for `webhook_body_key`;
/// 3. **claim** it (`mode => 'claim'`: the columns of `webhook_claim`) or
///    **store** it for the workers (`mode => 'enqueue'`: `outcome` is
///    `accepted`, `duplicate` or `conflict`).
///
/// `tolerance` NULL means the source's `webhook_dedup.sources.tolerance`,
/// else the provider's default window.
///
/// `event_type` and `event_time` are read by the profile (`event_time` is
/// NULL when absent or malformed); `last_step` is where a reclaim resumes.
/// The key's fingerprint follows the profile's rule (`FingerprintRule`:
/// the raw body, or for Stripe the canonical JSON of `type` and `data`, so a
/// retry that Stripe re-rendered is no conflict). Arguments and errors as
/// `webhook_verify` and `webhook_claim`; 22023 for another `mode`.
#[pg_extern(volatile, parallel_unsafe)]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn webhook_receive(
    scheme: Option<&str>,
    payload: Option<&[u8]>,
    headers: Option<Jsonb>,
    secrets: Option<pgrx::datum::Array<'_, &str>>,
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
    fcinfo: pg_sys::FunctionCallInfo,
) -> pgrx::composite_type!('static, "webhook_dedup.receive_result") {
    // Every argument is checked before anything is written.
    let scheme_name = required(scheme, "scheme");
    let scheme_parsed = Scheme::parse(scheme_name).or_raise();
    let body = required(payload, "payload");
    let mode = Mode::parse(required(mode, "mode")).or_raise();
    let body_key_fallback = required(body_key_fallback, "body_key_fallback");
    let lease_us = lease.map(args::lease);
    let source = source.unwrap_or(scheme_parsed.name());
    check_bounded("source", source).or_raise();
    let headers = header_map(headers);
    let secrets = required(secrets, "secrets");
    let secrets: Vec<Option<&str>> = secrets.iter().collect();
    let hmac = HmacArgs { header: signature_header, prefix: signature_prefix, algorithm, encoding };

    // One SPI connection for the whole intake (the source's settings, the
    // claim or enqueue): the verdict needs none, but a connection per step
    // would cost each its own set-up.
    let row: ReceiveRow = spi::connected(|conn| {
        let tolerance = tolerance.or_else(|| sources::settings(conn, source).tolerance);
        let verdict = verify_sql(Some(scheme_name), Some(body), &headers, secrets, tolerance, at, url, hmac);
        if !verdict.valid() {
            if let Some(counter) = Counter::for_rejection(verdict.reason) {
                metrics::count(source, None, counter, false);
            }
            let reason = verdict.reason.as_str().to_string();
            return (false, Some(reason), None, None, None, None, None, None, None, None);
        }

        let json = Body::new(body);
        let extracted =
            profile::profile(scheme_parsed).map(|p| profile::extract(p, &headers, &json)).unwrap_or_default();
        let Extracted { event_id, event_type, event_time } = extracted;
        let event_time = event_time.map(timestamptz);
        let (event_id, body_hash) = match event_id {
            Some(id) => (id, false),
            None if body_key_fallback => (body_hash_field(body), true),
            None => {
                metrics::count(source, event_type.as_deref(), Counter::MissingEventIds, false);
                return (
                    true,
                    Some("missing_event_id".into()),
                    None,
                    None,
                    None,
                    None,
                    None,
                    event_type,
                    event_time,
                    None,
                );
            }
        };
        let key = derive(&Parts { source, event_id: &event_id, environment, account, operation, body_hash }).or_raise();
        let idem_key = Key { source, idem_key: &key };
        // what the provider's profile says identifies the content (a retry
        // re-rendered by the provider is not a conflict)
        let fingerprint = match profile::profile(scheme_parsed) {
            Some(p) => p.fingerprint.fingerprint(&json),
            None => crate::signature::ct::sha256(body),
        };
        match mode {
            Mode::Claim => {
                let (outcome, token, attempt, _state, result, last_step, _, _) =
                    claim_one(conn, idem_key, Some(&fingerprint), lease_us, event_type.as_deref());
                (true, None, Some(key), Some(outcome), token, Some(attempt), result, event_type, event_time, last_step)
            }
            Mode::Enqueue => {
                let outcome = enqueue_one(conn, idem_key, body, &fingerprint, event_type.as_deref(), None);
                (true, None, Some(key), Some(outcome.as_str().into()), None, None, None, event_type, event_time, None)
            }
        }
    });
    receive_row(fcinfo, row)
}

/// SQL functions in schema `webhook_dedup`.
#[pgrx::pg_schema]
mod webhook_dedup {
    use crate::profile::{TimeFormat, PROFILES};
    use pgrx::prelude::*;

    /// The built-in provider profiles (read them through the view
    /// `webhook_dedup.providers`).
    #[pg_extern(immutable, parallel_safe)]
    #[allow(clippy::type_complexity)]
    fn provider_profiles() -> TableIterator<
        'static,
        (
            name!(scheme, String),
            name!(event_id, Option<String>),
            name!(event_type, Option<String>),
            name!(event_time, Option<String>),
            name!(retry_horizon, Option<pgrx::datum::Interval>),
            name!(notes, String),
            name!(sources, String),
        ),
    > {
        TableIterator::new(PROFILES.iter().map(|p| {
            let time = p.event_time.map(|(location, format)| {
                let format = match format {
                    TimeFormat::UnixSeconds => "Unix seconds",
                    TimeFormat::Rfc3339 => "RFC 3339",
                };
                format!("{} ({format})", location.describe())
            });
            let horizon = p.retry_horizon_s.map(|s| {
                pgrx::datum::Interval::new(0, (s / 86_400) as i32, (s % 86_400) * 1_000_000)
                    .expect("a horizon of days and seconds is a valid interval")
            });
            (
                p.scheme.name().to_string(),
                p.event_id.map(|l| l.describe()),
                p.event_type.map(|l| l.describe()),
                time,
                horizon,
                p.notes.to_string(),
                p.sources.to_string(),
            )
        }))
    }
}
