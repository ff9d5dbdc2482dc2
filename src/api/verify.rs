//! `webhook_verify`: signature verification over the raw body.

use crate::error::{required, OrRaise};
use crate::jsonb::Jsonb;
use crate::signature::{self, Config, Delivery, Headers, Scheme};
use pgrx::datum::Array;
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;

/// True when `payload` carries a valid `scheme` signature under one of
/// `secrets`, within the replay window at time `at`.
///
/// - `scheme`: `github` or `stripe` (22023 otherwise).
/// - `payload`: the raw request body, byte for byte.
/// - `headers`: JSON object of request headers; names case-insensitive,
///   values a string or an array of strings.
/// - `secrets`: every currently valid secret (rotation); empty, NULL or
///   whitespace-padded secrets are 22023/22004.
/// - `tolerance`: replay window (symmetric, inclusive); NULL means the
///   scheme's documented default (Stripe 300 s). No month part.
/// - `at`: the verifier's clock; defaults to `now()`.
///
/// Returns false for any signature that does not verify; raises only for
/// a misconfiguration. NULL arguments are 22004.
#[pg_extern(immutable, parallel_safe)]
fn webhook_verify(
    scheme: Option<&str>,
    payload: Option<&[u8]>,
    headers: Option<Jsonb>,
    secrets: Option<Array<'_, &str>>,
    tolerance: default!(Option<Interval>, "NULL"),
    at: default!(Option<TimestampWithTimeZone>, "now()"),
) -> bool {
    let scheme = Scheme::parse(required(scheme, "scheme")).or_raise();
    let body = required(payload, "payload");
    let headers = Headers::from_json_text(&required(headers, "headers").to_text()).or_raise();
    let secrets = required(secrets, "secrets");
    let secrets: Vec<Option<&str>> = secrets.iter().collect();
    let at = crate::time::micros(required(at, "at"), "at").or_raise();
    let tolerance_s = tolerance
        .map(|t| crate::time::duration_us(t, "tolerance").map(|us| us.div_euclid(1_000_000)))
        .transpose()
        .or_raise();
    let config = Config {
        secrets: signature::check_secrets(&secrets).or_raise(),
        tolerance_s,
        now_unix: crate::time::unix_seconds(at),
    };
    signature::verify(
        scheme,
        Delivery {
            body,
            headers: &headers,
        },
        &config,
    )
    .or_raise()
    .valid()
}
