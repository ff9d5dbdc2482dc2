//! Signature verification and signing in SQL: `webhook_verify`,
//! `webhook_verify_detail`, one typed convenience per provider,
//! `webhook_hmac` and `webhook_sign`. The rules live in
//! [`crate::signature`]; these wrappers only convert arguments.

use super::args::{header_map, unknown_algorithm, HmacArgs};
use crate::error::{required, Error, OrRaise, Raise};
use crate::jsonb::Jsonb;
use crate::signature::{self, Algorithm, Config, Delivery, Headers, Scheme, Verdict};
use crate::time::{duration_us, micros, timestamptz, unix_micros, unix_seconds};
use pgrx::datum::{Array, Interval, TimestampWithTimeZone};
use pgrx::prelude::*;

/// Everything a verification needs, converted from SQL.
#[allow(clippy::too_many_arguments)]
pub(crate) fn verify_sql(
    scheme: Option<&str>,
    payload: Option<&[u8]>,
    headers: &Headers,
    secrets: Vec<Option<&str>>,
    tolerance: Option<Interval>,
    at: Option<TimestampWithTimeZone>,
    url: Option<&str>,
    method: Option<&str>,
    hmac: HmacArgs<'_>,
) -> Verdict {
    let scheme = Scheme::parse(required(scheme, "scheme")).or_raise();
    let body = required(payload, "payload");
    let at = micros(required(at, "at"), "at").or_raise();
    let tolerance_us = tolerance.map(|t| duration_us(t, "tolerance")).transpose().or_raise();
    let config = Config {
        secrets: signature::check_secrets(&secrets).or_raise(),
        tolerance_us,
        now_us: unix_micros(at),
        hmac: hmac.spec(scheme).or_raise(),
    };
    signature::verify(scheme, Delivery { body, headers, url, method }, &config).or_raise()
}

/// True when `payload` (the raw body, byte for byte) carries a valid
/// `scheme` signature under any of `secrets`, within the replay window at
/// time `at`. See `docs/signatures.md` for every scheme's rule and source.
///
/// - `scheme`: github, stripe, shopify, slack, standard (aliases svix,
///   clerk, resend), paddle, twilio, zoom, twitter, square, hubspot,
///   twitch, intercom, typeform, calendly, discord, sendgrid, mailgun,
///   linear, hmac; else 22023.
/// - `headers`: JSON object of request headers; names case-insensitive,
///   values a string or an array of strings.
/// - `secrets`: every currently valid secret (rotation), or public key
///   (standard `whpk_`, discord, sendgrid). Empty, NULL, whitespace-padded,
///   undecodable (standard) or unusable public keys are 22023/22004.
/// - `tolerance`: replay window (symmetric, inclusive) for timestamped
///   schemes; NULL means the provider's documented default.
/// - `at`: the verifier's clock; defaults to `now()`.
/// - `url`: the full request URL, for twilio, square (the notification
///   URL) and hubspot only.
/// - `signature_header`, `signature_prefix`, `algorithm` (sha1, sha256,
///   sha512; default sha256), `encoding` (hex, base64; default hex): for
///   hmac only.
///
/// Returns false for any request that does not verify; raises only for a
/// misconfiguration.
#[pg_extern(immutable, parallel_safe, schema = "webhook_dedup")]
#[allow(clippy::too_many_arguments)]
fn webhook_verify(
    scheme: Option<&str>,
    payload: Option<&[u8]>,
    headers: Option<Jsonb>,
    secrets: Option<Array<'_, &str>>,
    tolerance: default!(Option<Interval>, "NULL"),
    at: default!(Option<TimestampWithTimeZone>, "now()"),
    url: default!(Option<&str>, "NULL"),
    signature_header: default!(Option<&str>, "NULL"),
    signature_prefix: default!(Option<&str>, "NULL"),
    algorithm: default!(Option<&str>, "NULL"),
    encoding: default!(Option<&str>, "NULL"),
    method: default!(Option<&str>, "NULL"),
) -> bool {
    let hmac = HmacArgs { header: signature_header, prefix: signature_prefix, algorithm, encoding };
    let secrets = required(secrets, "secrets");
    let secrets: Vec<Option<&str>> = secrets.iter().collect();
    verify_sql(scheme, payload, &header_map(headers), secrets, tolerance, at, url, method, hmac).valid()
}

/// `webhook_verify` with its reasons: one row of `valid`, `reason` (ok,
/// missing_header, malformed_header, unsupported_version,
/// no_matching_signature, timestamp_too_old, timestamp_too_new),
/// `secret_index` (1-based position in `secrets` of the secret that matched,
/// so an operator knows when an old secret can be retired) and `signed_at`
/// (the signed timestamp, for schemes that have one).
#[pg_extern(immutable, parallel_safe, schema = "webhook_dedup")]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn webhook_verify_detail(
    scheme: Option<&str>,
    payload: Option<&[u8]>,
    headers: Option<Jsonb>,
    secrets: Option<Array<'_, &str>>,
    tolerance: default!(Option<Interval>, "NULL"),
    at: default!(Option<TimestampWithTimeZone>, "now()"),
    url: default!(Option<&str>, "NULL"),
    signature_header: default!(Option<&str>, "NULL"),
    signature_prefix: default!(Option<&str>, "NULL"),
    algorithm: default!(Option<&str>, "NULL"),
    encoding: default!(Option<&str>, "NULL"),
    method: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(valid, bool),
        name!(reason, String),
        name!(secret_index, Option<i32>),
        name!(signed_at, Option<TimestampWithTimeZone>),
    ),
> {
    let hmac = HmacArgs { header: signature_header, prefix: signature_prefix, algorithm, encoding };
    let secrets = required(secrets, "secrets");
    let secrets: Vec<Option<&str>> = secrets.iter().collect();
    let v = verify_sql(scheme, payload, &header_map(headers), secrets, tolerance, at, url, method, hmac);
    let signed_at = v.signed_at.map(|s| timestamptz((s - crate::calendar::PG_EPOCH_UNIX_S) * 1_000_000));
    TableIterator::once((v.valid(), v.reason.as_str().to_string(), v.secret_index.map(|i| i as i32 + 1), signed_at))
}

/// A typed convenience: `headers` built from named values (NULL values are
/// absent headers), one secret.
#[allow(clippy::too_many_arguments)]
fn typed(
    scheme: &str,
    payload: Option<&[u8]>,
    header_values: &[(&str, Option<&str>)],
    secret: Option<&str>,
    tolerance: Option<Interval>,
    at: Option<TimestampWithTimeZone>,
    url: Option<&str>,
) -> bool {
    let secret = required(secret, "secret");
    let headers = Headers::from_pairs(header_values.iter().filter_map(|(name, value)| value.map(|v| (*name, v))));
    verify_sql(Some(scheme), payload, &headers, vec![Some(secret)], tolerance, at, url, None, HmacArgs::NONE).valid()
}

/// The clock for schemes that sign no timestamp (it is never read).
fn untimed() -> Option<TimestampWithTimeZone> {
    Some(timestamptz(0))
}

/// GitHub: `X-Hub-Signature-256` (`sha256=<hex>`) over the raw body.
#[pg_extern(immutable, parallel_safe, schema = "webhook_dedup")]
fn webhook_verify_github(payload: Option<&[u8]>, signature_header: Option<&str>, secret: Option<&str>) -> bool {
    typed("github", payload, &[("X-Hub-Signature-256", signature_header)], secret, None, untimed(), None)
}

/// Stripe: the `Stripe-Signature` header value; 300 s window by default.
#[pg_extern(immutable, parallel_safe, schema = "webhook_dedup")]
fn webhook_verify_stripe(
    payload: Option<&[u8]>,
    signature_header: Option<&str>,
    secret: Option<&str>,
    tolerance: default!(Option<Interval>, "NULL"),
    at: default!(Option<TimestampWithTimeZone>, "now()"),
) -> bool {
    typed("stripe", payload, &[("Stripe-Signature", signature_header)], secret, tolerance, at, None)
}

/// Shopify: the `X-Shopify-Hmac-Sha256` header value (base64).
#[pg_extern(immutable, parallel_safe, schema = "webhook_dedup")]
fn webhook_verify_shopify(payload: Option<&[u8]>, hmac_header: Option<&str>, secret: Option<&str>) -> bool {
    typed("shopify", payload, &[("X-Shopify-Hmac-Sha256", hmac_header)], secret, None, untimed(), None)
}

/// Slack: `X-Slack-Request-Timestamp` and `X-Slack-Signature`; 300 s window by default.
#[pg_extern(immutable, parallel_safe, schema = "webhook_dedup")]
fn webhook_verify_slack(
    payload: Option<&[u8]>,
    timestamp_header: Option<&str>,
    signature_header: Option<&str>,
    secret: Option<&str>,
    tolerance: default!(Option<Interval>, "NULL"),
    at: default!(Option<TimestampWithTimeZone>, "now()"),
) -> bool {
    let values = [("X-Slack-Request-Timestamp", timestamp_header), ("X-Slack-Signature", signature_header)];
    typed("slack", payload, &values, secret, tolerance, at, None)
}

/// Standard Webhooks / Svix: `webhook-id`, `webhook-timestamp`,
/// `webhook-signature`; secret `whsec_<base64>`; 300 s window by default.
#[pg_extern(immutable, parallel_safe, schema = "webhook_dedup")]
#[allow(clippy::too_many_arguments)]
fn webhook_verify_standard(
    payload: Option<&[u8]>,
    msg_id: Option<&str>,
    msg_timestamp: Option<&str>,
    signature_header: Option<&str>,
    secret: Option<&str>,
    tolerance: default!(Option<Interval>, "NULL"),
    at: default!(Option<TimestampWithTimeZone>, "now()"),
) -> bool {
    let values =
        [("webhook-id", msg_id), ("webhook-timestamp", msg_timestamp), ("webhook-signature", signature_header)];
    typed("standard", payload, &values, secret, tolerance, at, None)
}

/// Paddle Billing: the `Paddle-Signature` header value; 5 s window by default.
#[pg_extern(immutable, parallel_safe, schema = "webhook_dedup")]
fn webhook_verify_paddle(
    payload: Option<&[u8]>,
    signature_header: Option<&str>,
    secret: Option<&str>,
    tolerance: default!(Option<Interval>, "NULL"),
    at: default!(Option<TimestampWithTimeZone>, "now()"),
) -> bool {
    typed("paddle", payload, &[("Paddle-Signature", signature_header)], secret, tolerance, at, None)
}

/// Twilio: the full request `url`, the raw body (form parameters, or JSON
/// with `bodySHA256` in the URL) and `X-Twilio-Signature`; key = auth token.
#[pg_extern(immutable, parallel_safe, schema = "webhook_dedup")]
fn webhook_verify_twilio(
    url: Option<&str>,
    payload: Option<&[u8]>,
    signature_header: Option<&str>,
    auth_token: Option<&str>,
) -> bool {
    let url = required(url, "url");
    typed("twilio", payload, &[("X-Twilio-Signature", signature_header)], auth_token, None, untimed(), Some(url))
}

/// The raw HMAC (RFC 2104) of `payload` under `secret` with `algorithm`
/// (sha1, sha256 or sha512). An empty secret or unknown algorithm is 22023.
#[pg_extern(immutable, strict, parallel_safe, schema = "webhook_dedup")]
fn webhook_hmac(payload: &[u8], secret: &[u8], algorithm: default!(&str, "'sha256'")) -> Vec<u8> {
    let algorithm = Algorithm::parse(algorithm).ok_or_else(|| unknown_algorithm(algorithm)).or_raise();
    if secret.is_empty() {
        Error::invalid("secret must not be empty").raise();
    }
    signature::ct::hmac(algorithm, secret, &[payload])
}

/// The headers a sender using `scheme` would send with `payload`, as a JSON
/// object (for tests, and for sending webhooks yourself). `at` is the
/// signing time (timestamped schemes); `msg_id` is required for standard
/// and twitch, and for mailgun (the token), `url` for twilio, square and
/// hubspot, `method` for hubspot, `signature_header` (and optionally the
/// prefix, algorithm and encoding) for hmac. The secret follows the same
/// rules as for verification. Mailgun signs no header: the result is the
/// `{"signature": {...}}` member to merge into the body (which Mailgun does
/// not sign). Linear signs the payload as given, which carries its own
/// `webhookTimestamp`. Schemes signed with a private key (discord, sendgrid,
/// and standard's `v1a` with a `whpk_` key) cannot be signed here: 22023.
#[pg_extern(immutable, parallel_safe, schema = "webhook_dedup")]
#[allow(clippy::too_many_arguments)]
fn webhook_sign(
    scheme: Option<&str>,
    payload: Option<&[u8]>,
    secret: Option<&str>,
    at: default!(Option<TimestampWithTimeZone>, "now()"),
    msg_id: default!(Option<&str>, "NULL"),
    url: default!(Option<&str>, "NULL"),
    signature_header: default!(Option<&str>, "NULL"),
    signature_prefix: default!(Option<&str>, "NULL"),
    algorithm: default!(Option<&str>, "NULL"),
    encoding: default!(Option<&str>, "NULL"),
    method: default!(Option<&str>, "NULL"),
) -> Jsonb {
    // the checks in the order they always ran: the scheme, a NULL payload,
    // an unsignable scheme, the secret, the time, the generic header
    let scheme = Scheme::parse(required(scheme, "scheme")).or_raise();
    let body = required(payload, "payload");
    signature::check_signable(scheme).or_raise();
    let secret = signature::check_secrets(&[secret]).or_raise()[0];
    let key = signature::secret_key(scheme, secret).or_raise();
    let at_us = micros(required(at, "at"), "at").or_raise();
    let hmac =
        HmacArgs { header: signature_header, prefix: signature_prefix, algorithm, encoding }.spec(scheme).or_raise();
    let request =
        signature::SignRequest { unix_s: unix_seconds(at_us), unix_us: unix_micros(at_us), msg_id, url, method, hmac };
    match signature::sign(scheme, body, &key, &request).or_raise() {
        signature::Signed::Headers(headers) => {
            let object: serde_json::Map<String, serde_json::Value> =
                headers.into_iter().map(|(k, v)| (k, serde_json::Value::String(v))).collect();
            Jsonb::from_text(&serde_json::Value::Object(object).to_string())
        }
        signature::Signed::Body(member) => Jsonb::from_text(&member.to_string()),
    }
}
