//! Provider profiles: where each scheme's deliveries carry the event id
//! (what the idempotency key is built from), the event type, and the event
//! time (what ordering uses), plus the provider's documented retry horizon
//! (how long a duplicate can still arrive, which retention must cover).
//! Pure Rust; `webhook_dedup.providers` shows this table in SQL and
//! `webhook_receive` uses it.
//!
//! Every fact cites its source in [`Profile::sources`]; `docs/signatures.md`
//! repeats them per provider.

use crate::signature::{Headers, Scheme};
use serde_json::Value;

/// Where a value lives in a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location<'a> {
    /// The first of these headers that is present (lower-case names).
    Headers(&'a [&'a str]),
    /// One header (lower-case name).
    Header(&'a str),
    /// A JSON pointer (RFC 6901) into the body.
    Body(&'a str),
}

impl Location<'_> {
    pub fn describe(self) -> String {
        match self {
            Location::Headers(names) => names.iter().map(|n| format!("header {n}")).collect::<Vec<_>>().join(", else "),
            Location::Header(name) => format!("header {name}"),
            Location::Body(pointer) => format!("body {pointer}"),
        }
    }
}

/// How an event time is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeFormat {
    /// Whole Unix seconds, as a JSON number or a numeric string.
    UnixSeconds,
    /// Whole Unix milliseconds, as a JSON number or a numeric string.
    UnixMilliseconds,
    /// RFC 3339 (`2023-08-21T11:57:42.337Z`).
    Rfc3339,
}

impl TimeFormat {
    pub const ALL: [TimeFormat; 3] = [TimeFormat::UnixSeconds, TimeFormat::UnixMilliseconds, TimeFormat::Rfc3339];

    /// The name `webhook_dedup.sources.event_time_format` takes.
    pub fn name(self) -> &'static str {
        match self {
            TimeFormat::UnixSeconds => "unix_seconds",
            TimeFormat::UnixMilliseconds => "unix_milliseconds",
            TimeFormat::Rfc3339 => "rfc3339",
        }
    }

    pub fn parse(name: &str) -> Option<TimeFormat> {
        TimeFormat::ALL.into_iter().find(|f| f.name() == name)
    }

    /// How `webhook_dedup.providers` shows the format.
    pub fn describe(self) -> &'static str {
        match self {
            TimeFormat::UnixSeconds => "Unix seconds",
            TimeFormat::UnixMilliseconds => "Unix milliseconds",
            TimeFormat::Rfc3339 => "RFC 3339",
        }
    }
}

/// What part of a delivery identifies its content: the fingerprint of a
/// key is SHA-256 of it, and a later delivery of the key with another
/// fingerprint is a conflict. So it must leave out what a provider changes
/// between attempts of one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FingerprintRule<'a> {
    /// The raw body, byte for byte: the provider re-sends identical bytes.
    Body,
    /// The values at these JSON pointers (RFC 6901), as one JSON object
    /// from pointer to value (a pointer that resolves to nothing is left
    /// out) in the canonical form of RFC 8785 (JSON Canonicalization Scheme:
    /// members sorted, no insignificant whitespace, numbers and strings
    /// written one way), so that a re-rendered envelope of the same content
    /// has the same fingerprint. A body that is not JSON falls back to
    /// [`Body`].
    ///
    /// [`Body`]: FingerprintRule::Body
    Pointers(&'a [&'a str]),
    /// [`Pointers`](FingerprintRule::Pointers) configured in
    /// `webhook_dedup.sources.fingerprint_pointers`.
    Configured(&'a [String]),
    /// What the signature covers, in one canonical form
    /// ([`crate::signature::signed_content`]: Twilio's URL and form
    /// parameters sorted by name), for a scheme that signs the content but
    /// not the bytes: a re-ordered or re-encoded form is the same request.
    /// Without the signed text (no URL), the raw body.
    SignedText,
}

impl FingerprintRule<'_> {
    /// How `webhook_dedup.providers` shows the rule.
    pub fn describe(self) -> String {
        let list = |pointers: Vec<&str>| format!("canonical JSON (RFC 8785) of {}", pointers.join(", "));
        match self {
            FingerprintRule::Body => "raw body".into(),
            FingerprintRule::Pointers(p) => list(p.to_vec()),
            FingerprintRule::Configured(p) => list(p.iter().map(String::as_str).collect()),
            FingerprintRule::SignedText => "signed text: the URL and the form parameters sorted by name".into(),
        }
    }

    /// The fingerprint of a delivery under this rule: of `signed`, the
    /// scheme's signed text in canonical form, for
    /// [`FingerprintRule::SignedText`] (when there is one), else
    /// [`FingerprintRule::fingerprint`] of the body.
    pub fn fingerprint_signed(self, body: &Body<'_>, signed: Option<&[u8]>) -> Fingerprint {
        match (self, signed) {
            (FingerprintRule::SignedText, Some(text)) => Fingerprint::signed(text),
            _ => self.fingerprint(body),
        }
    }

    /// The fingerprint of `body` under this rule ([`Fingerprint`]);
    /// [`FingerprintRule::SignedText`] without its text is the raw body's.
    pub fn fingerprint(self, body: &Body<'_>) -> Fingerprint {
        let canonical = match self {
            FingerprintRule::Body | FingerprintRule::SignedText => None,
            FingerprintRule::Pointers(p) => canonical_values(p, body),
            FingerprintRule::Configured(p) => canonical_values(p, body),
        };
        match canonical {
            Some(text) => Fingerprint::canonical(&text),
            None => Fingerprint::raw(body.raw),
        }
    }
}

/// A key's fingerprint, as stored: the SHA-256 of the raw body (32 bytes,
/// what `webhook_claim(..., payload)` stores too), or [`CANONICAL_TAG`]
/// followed by the SHA-256 of a canonical JSON text (33 bytes). The lengths
/// keep the two kinds apart: a body whose raw bytes happen to be another
/// body's canonical text never matches that body's fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    bytes: [u8; 33],
    len: usize,
}

/// The first byte of a canonical-JSON fingerprint.
pub const CANONICAL_TAG: u8 = 0x01;
/// The first byte of the fingerprint of a canonical signed text
/// ([`Fingerprint::signed`]).
pub const SIGNED_TAG: u8 = 0x02;

impl Fingerprint {
    /// The fingerprint of raw bytes.
    pub fn raw(bytes: &[u8]) -> Fingerprint {
        let mut out = [0; 33];
        out[..32].copy_from_slice(&crate::signature::ct::sha256(bytes));
        Fingerprint { bytes: out, len: 32 }
    }

    /// The fingerprint of a scheme's signed text in canonical form
    /// ([`crate::signature::signed_content`]: Twilio's URL and sorted form
    /// parameters), tagged [`SIGNED_TAG`] so that it is never taken for the
    /// hash of raw bytes.
    pub fn signed(text: &[u8]) -> Fingerprint {
        let mut out = [SIGNED_TAG; 33];
        out[1..].copy_from_slice(&crate::signature::ct::sha256(text));
        Fingerprint { bytes: out, len: 33 }
    }

    fn canonical(text: &[u8]) -> Fingerprint {
        let mut out = [CANONICAL_TAG; 33];
        out[1..].copy_from_slice(&crate::signature::ct::sha256(text));
        Fingerprint { bytes: out, len: 33 }
    }

    /// Whether this is the fingerprint of raw bytes.
    pub fn is_raw(&self) -> bool {
        self.len == 32
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// RFC 8785 canonical JSON of `{pointer: value}` for the pointers that
/// resolve in `body`; `None` when the body is not JSON.
fn canonical_values<S: AsRef<str>>(pointers: &[S], body: &Body<'_>) -> Option<Vec<u8>> {
    let json = body.json()?;
    let kept: serde_json::Map<String, Value> =
        pointers.iter().filter_map(|p| json.pointer(p.as_ref()).map(|v| (p.as_ref().to_string(), v.clone()))).collect();
    // RFC 8785 writes numbers as IEEE doubles: an integer beyond 2^53 would
    // lose digits (two orders, one fingerprint). Such a body is hashed raw.
    if !kept.values().all(exact_as_double) {
        return None;
    }
    // serializing a serde_json value cannot fail (no non-string keys)
    serde_json_canonicalizer::to_vec(&Value::Object(kept)).ok()
}

/// Whether every number in `value` survives RFC 8785's conversion to an
/// IEEE double (integers of at most 2^53 in magnitude; floats already are).
fn exact_as_double(value: &Value) -> bool {
    const MAX_EXACT: u64 = 1 << 53;
    match value {
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u <= MAX_EXACT,
            (None, Some(i)) => i.unsigned_abs() <= MAX_EXACT,
            (None, None) => true,
        },
        Value::Array(items) => items.iter().all(exact_as_double),
        Value::Object(members) => members.values().all(exact_as_double),
        _ => true,
    }
}

/// Whether `text` is a JSON pointer (RFC 6901, section 3): empty, or `/`
/// followed by reference tokens in which every `~` is followed by `0` or
/// `1`.
pub fn is_json_pointer(text: &str) -> bool {
    if !(text.is_empty() || text.starts_with('/')) {
        return false;
    }
    let bytes = text.as_bytes();
    bytes.iter().enumerate().all(|(i, &b)| b != b'~' || matches!(bytes.get(i + 1), Some(b'0' | b'1')))
}

/// Whether a provider retries a delivery answered 4xx.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retries4xx {
    /// Like any failure.
    Yes,
    /// Never: a 4xx loses the delivery.
    No,
    /// Some 4xx statuses only, or with a rule: the text says which.
    Partly(&'static str),
    /// The provider's documents do not say.
    Undocumented,
}

impl Retries4xx {
    /// How `webhook_dedup.providers` shows it.
    pub fn describe(self) -> String {
        match self {
            Retries4xx::Yes => "yes".into(),
            Retries4xx::No => "no".into(),
            Retries4xx::Partly(text) => format!("partly: {text}"),
            Retries4xx::Undocumented => "not documented".into(),
        }
    }
}

/// An answer that makes a provider stop retrying one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// A response header (name as sent, value).
    Header(&'static str, &'static str),
    /// A status code (Mailgun's 406).
    Status(u16),
}

impl StopSignal {
    /// How `webhook_dedup.providers` shows it.
    pub fn describe(self) -> String {
        match self {
            StopSignal::Header(name, value) => format!("header {name}: {value}"),
            StopSignal::Status(code) => format!("status {code}"),
        }
    }
}

/// The response deadline assumed for a provider that documents none (and
/// for the generic `hmac` scheme): the shortest any profile documents
/// (Slack's, Zoom's and Discord's 3 s), so the default wait never outlasts
/// a deadline.
pub const ASSUMED_DEADLINE_MS: i64 = 3_000;

/// The default bounded wait for an in-flight duplicate (`webhook_receive`'s
/// `wait`), in milliseconds: the provider's response deadline minus a
/// margin of a fifth of it, at least 1 s, for the round trips and the
/// receiver's own work around the call (3 s: 2 s; 5 s: 4 s; 10 s: 8 s).
pub fn default_wait_ms(profile: Option<&Profile>) -> i64 {
    let deadline = profile.and_then(|p| p.response_deadline_ms).unwrap_or(ASSUMED_DEADLINE_MS);
    (deadline - (deadline / 5).max(1_000)).max(0)
}

/// What a scheme's deliveries carry.
#[derive(Debug, Clone, Copy)]
pub struct Profile {
    pub scheme: Scheme,
    /// What the key's fingerprint covers ([`FingerprintRule`]).
    pub fingerprint: FingerprintRule<'static>,
    pub event_id: Option<Location<'static>>,
    /// The provider sends no event id at all: deliveries are keyed on the
    /// body (`webhook_body_key`) without the caller asking for it, which is
    /// right when every retry re-sends the same bytes.
    pub body_key: bool,
    pub event_type: Option<Location<'static>>,
    pub event_time: Option<(Location<'static>, TimeFormat)>,
    /// Whether `webhook_receive` claims a replay guard for each delivery by
    /// default: the scheme signs neither the event id nor a time, so a
    /// captured delivery could be re-sent under a new id
    /// (`crate::store::replay_guards`).
    pub replay_guard: bool,
    /// The control message `webhook_receive` answers itself
    /// (`crate::handshake`), as `webhook_dedup.providers` shows it.
    pub handshake: Option<&'static str>,
    /// How long after the first attempt the provider may still deliver an
    /// event, in seconds (`None`: it does not retry on its own).
    pub retry_horizon_s: Option<i64>,
    /// How long the provider waits for the answer before it counts the
    /// attempt as failed, in milliseconds (`None`: not documented).
    pub response_deadline_ms: Option<i64>,
    /// Whether it retries a delivery answered 4xx.
    pub retries_4xx: Retries4xx,
    /// What repeated failures lead to (a disabled or deleted endpoint).
    pub disable_rule: &'static str,
    /// The answer that stops its retries of one message, if it has one.
    pub stop_signal: Option<StopSignal>,
    /// What the horizon and the locations mean in practice.
    pub notes: &'static str,
    /// Where each fact comes from.
    pub sources: &'static str,
}

const MINUTE: i64 = 60;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

/// The built-in profiles, one per scheme that has one (the generic `hmac`
/// scheme has none: its caller knows where its ids are).
pub const PROFILES: [Profile; 19] = [
    Profile {
        scheme: Scheme::Stripe,
        // Stripe renders the event anew for each attempt: pending_webhooks
        // (webhooks not yet delivered) and request change between attempts
        // of one evt_; type and data are the event itself.
        fingerprint: FingerprintRule::Pointers(&["/type", "/data"]),
        event_id: Some(Location::Body("/id")),
        body_key: false,
        event_type: Some(Location::Body("/type")),
        event_time: Some((Location::Body("/created"), TimeFormat::UnixSeconds)),
        retry_horizon_s: Some(3 * DAY),
        replay_guard: false,
        handshake: None,
        response_deadline_ms: None,
        retries_4xx: Retries4xx::Yes,
        disable_rule: "An endpoint that keeps failing is disabled after days of failures, after warning e-mails.",
        stop_signal: None,
        notes: "Live mode retries for up to three days with exponential backoff (test mode: a few hours).",
        sources: "https://docs.stripe.com/webhooks#retries ; https://docs.stripe.com/api/events/object (pending_webhooks, request) ; https://docs.stripe.com/webhooks (undelivered events: any non-2xx is retried for three days; no response deadline is published)",
    },
    Profile {
        scheme: Scheme::Github,
        fingerprint: FingerprintRule::Body,
        event_id: Some(Location::Headers(&["x-github-delivery"])),
        body_key: false,
        event_type: Some(Location::Headers(&["x-github-event"])),
        event_time: None,
        retry_horizon_s: Some(3 * DAY),
        replay_guard: true,
        handshake: None,
        response_deadline_ms: Some(10_000),
        retries_4xx: Retries4xx::Partly("GitHub retries no answer at all; a failed delivery is redelivered by hand"),
        disable_rule: "Never disabled for failures.",
        stop_signal: None,
        notes: "No automatic retries; a failed delivery can be redelivered by hand for three days, with the same X-GitHub-Delivery.",
        sources: "https://docs.github.com/en/webhooks/webhook-events-and-payloads#delivery-headers ; https://docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks ; https://docs.github.com/en/webhooks/using-webhooks/best-practices-for-using-webhooks (\"respond with a 2XX response within 10 seconds\") ; https://docs.github.com/en/webhooks/using-webhooks/handling-failed-webhook-deliveries",
    },
    Profile {
        scheme: Scheme::Shopify,
        fingerprint: FingerprintRule::Body,
        event_id: Some(Location::Headers(&["x-shopify-event-id", "x-shopify-webhook-id"])),
        body_key: false,
        event_type: Some(Location::Headers(&["x-shopify-topic"])),
        event_time: Some((Location::Headers(&["x-shopify-triggered-at"]), TimeFormat::Rfc3339)),
        retry_horizon_s: Some(4 * HOUR),
        replay_guard: true,
        handshake: None,
        response_deadline_ms: Some(5_000),
        retries_4xx: Retries4xx::Yes,
        disable_rule: "A subscription made through the Admin API is deleted after 8 consecutive failures.",
        stop_signal: None,
        notes: "8 retries over 4 hours with exponential backoff since 2024-09-10 (before: 19 over 48 hours); retries carry the original payload and X-Shopify-Triggered-At.",
        sources: "https://shopify.dev/docs/apps/build/webhooks/subscribe/https ; https://shopify.dev/changelog/updates-to-webhook-retry-mechanism",
    },
    Profile {
        scheme: Scheme::Slack,
        fingerprint: FingerprintRule::Body,
        event_id: Some(Location::Body("/event_id")),
        body_key: false,
        event_type: Some(Location::Body("/event/type")),
        event_time: Some((Location::Body("/event_time"), TimeFormat::UnixSeconds)),
        retry_horizon_s: Some(5 * MINUTE),
        replay_guard: false,
        handshake: Some("url_verification (Events API): answered {\"challenge\": <the body's challenge>}"),
        response_deadline_ms: Some(3_000),
        retries_4xx: Retries4xx::Yes,
        disable_rule: "Event subscriptions are disabled for a while when more than 95% of deliveries (retries included) fail within 60 minutes; apps under 1,000 events an hour are exempt.",
        stop_signal: Some(StopSignal::Header("X-Slack-No-Retry", "1")),
        notes: "Events API: 3 retries (at once, after 1 minute, after 5 minutes), each with X-Slack-Retry-Num. Slash commands and interactivity carry no event_id (use the body-hash fallback).",
        sources: "https://api.slack.com/apis/events-api#retries ; https://api.slack.com/apis/events-api#callback-field ; https://docs.slack.dev/apis/events-api/ (http_timeout after 3 seconds; \"as part of your non-200 OK response: x-slack-no-retry: 1\")",
    },
    Profile {
        scheme: Scheme::Standard,
        fingerprint: FingerprintRule::Body,
        event_id: Some(Location::Headers(&["webhook-id", "svix-id"])),
        body_key: false,
        event_type: Some(Location::Body("/type")),
        event_time: Some((Location::Body("/timestamp"), TimeFormat::Rfc3339)),
        retry_horizon_s: Some(75 * HOUR + 35 * MINUTE),
        replay_guard: false,
        handshake: None,
        response_deadline_ms: Some(15_000),
        retries_4xx: Retries4xx::Yes,
        disable_rule: "Svix disables an endpoint whose deliveries all failed for 5 days; the specification says a 410 Gone disables the endpoint.",
        stop_signal: Some(StopSignal::Header("webhook-delivery", "abort-message")),
        notes: "webhook-id is the same on every retry; the payload's timestamp is the event time (webhook-timestamp is the attempt's). The specification's example schedule ends about 75.6 hours after the first attempt.",
        sources: "https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md ; https://docs.svix.com/retries ; https://docs.svix.com/receiving/delivery-control (\"webhook-delivery: abort-message stops retries of the message just sent; has no effect when ... delivery is considered successful\")",
    },
    Profile {
        scheme: Scheme::Paddle,
        fingerprint: FingerprintRule::Body,
        event_id: Some(Location::Body("/event_id")),
        body_key: false,
        event_type: Some(Location::Body("/event_type")),
        event_time: Some((Location::Body("/occurred_at"), TimeFormat::Rfc3339)),
        retry_horizon_s: Some(3 * DAY),
        replay_guard: false,
        handshake: None,
        response_deadline_ms: Some(5_000),
        retries_4xx: Retries4xx::Yes,
        disable_rule: "Not documented for endpoints; a notification whose retries are exhausted is marked failed.",
        stop_signal: None,
        notes: "Live accounts: up to 60 retries over 3 days with exponential backoff.",
        sources: "https://developer.paddle.com/webhooks/respond-to-webhooks (\"Returns 200 within five seconds\"; any other status is retried) ; https://developer.paddle.com/webhooks/signature-verification",
    },
    Profile {
        scheme: Scheme::Twilio,
        fingerprint: FingerprintRule::SignedText,
        event_id: Some(Location::Headers(&["i-twilio-idempotency-token"])),
        body_key: false,
        event_type: None,
        event_time: None,
        retry_horizon_s: None,
        // Twilio signs neither I-Twilio-Idempotency-Token nor a time: a
        // captured request re-sent under a new token verifies. The guard
        // keys it on the signed text, not the raw bytes, which a
        // re-ordered form would change (crate::signature::signed_content).
        replay_guard: true,
        handshake: None,
        response_deadline_ms: Some(15_000),
        retries_4xx: Retries4xx::Partly("only when the URL asks for retries (connection overrides #rc and #rp); by default one retry of a failed connection"),
        disable_rule: "Not documented.",
        stop_signal: None,
        notes: "No retries by default; connection overrides (#rc=) allow up to 5 within seconds, each with the same I-Twilio-Idempotency-Token. The token is not signed, so the replay guard is on, keyed on the signed URL and form parameters (a request repeated with the same parameters to the same URL, such as the same Gather digits twice, is answered as the first: set webhook_dedup.sources.replay_guard = false for such a source).",
        sources: "https://www.twilio.com/docs/usage/webhooks/webhooks-connection-overrides ; https://www.twilio.com/docs/usage/webhooks/webhooks-security ; https://www.twilio.com/docs/api/errors/11205 (\"Twilio will wait for a total of 15 seconds to receive an HTTP response\")",
    },
    Profile {
        scheme: Scheme::Zoom,
        fingerprint: FingerprintRule::Body,
        event_id: None,
        body_key: true,
        event_type: Some(Location::Body("/event")),
        event_time: Some((Location::Body("/event_ts"), TimeFormat::UnixMilliseconds)),
        retry_horizon_s: Some(85 * MINUTE),
        replay_guard: false,
        handshake: Some(
            "endpoint.url_validation: answered {\"plainToken\": <payload.plainToken>, \"encryptedToken\": <hex HMAC-SHA256 of plainToken under the secret token>}",
        ),
        response_deadline_ms: Some(3_000),
        retries_4xx: Retries4xx::Yes,
        disable_rule: "Not documented for endpoints; an event is dropped after its 3 retries.",
        stop_signal: None,
        notes: "Zoom sends no event id: deliveries are keyed on the body, which a retry re-sends. After a failed delivery, 3 retries: 5 minutes later, then 20, then 60 minutes after the one before. The request timestamp is signed.",
        sources: "https://developers.zoom.us/docs/api/webhooks/ ; https://devsupport.zoom.us/hc/en-us/articles/360059893812-Webhook-delays ; https://developers.zoom.us/blog/webhook-delays (\"either a 200 or a 204 HTTP status code within three seconds\")",
    },
    Profile {
        scheme: Scheme::Twitter,
        fingerprint: FingerprintRule::Body,
        event_id: None,
        body_key: true,
        event_type: None,
        event_time: None,
        retry_horizon_s: Some(5 * MINUTE),
        replay_guard: false,
        handshake: Some(
            "CRC (GET ?crc_token=<token>, unsigned): answered {\"response_token\": \"sha256=<base64 HMAC-SHA256 of crc_token under the consumer secret>\"}",
        ),
        response_deadline_ms: Some(3_000),
        retries_4xx: Retries4xx::Yes,
        disable_rule: "The webhook is marked invalid when its CRC answers fail (a wrong response_token, or errors for more than 28 hours).",
        stop_signal: None,
        notes: "X sends no event id and signs no time: deliveries are keyed on the body, which a retry re-sends (so a re-sent body is a duplicate without a replay guard). The event type is the name of the payload's array member (tweet_create_events, ...). Enterprise Account Activity API: up to 3 retries within 5 minutes.",
        sources: "https://docs.x.com/x-api/webhooks/quickstart ; https://developer.x.com/en/docs/twitter-api/enterprise/account-activity-api/guides/activity-retries (\"a response isn't received within three seconds\"; the v2 Webhooks page says 10 seconds: the shorter is used) ; https://docs.x.com/x-api/webhooks/introduction",
    },
    Profile {
        scheme: Scheme::Square,
        fingerprint: FingerprintRule::Body,
        event_id: Some(Location::Body("/event_id")),
        body_key: false,
        event_type: Some(Location::Body("/type")),
        event_time: Some((Location::Body("/created_at"), TimeFormat::Rfc3339)),
        retry_horizon_s: Some(72 * HOUR),
        replay_guard: false,
        handshake: None,
        response_deadline_ms: Some(10_000),
        retries_4xx: Retries4xx::Yes,
        disable_rule: "Not documented; a notification is discarded after 72 hours of retries.",
        stop_signal: None,
        notes: "event_id is Square's idempotency value, the same on every retry, and it is in the signed body (with the signed notification URL): no replay guard. Unsuccessful deliveries are retried for up to 72 hours after the event: after 1, 2, 4, 8, 16 and 32 minutes, then hourly.",
        sources: "https://developer.squareup.com/docs/webhooks/step4manage ; https://developer.squareup.com/docs/webhooks-api/delivery-sla (\"responding within 10 seconds with an HTTP 2xx\") ; https://developer.squareup.com/docs/webhooks/troubleshooting",
    },
    Profile {
        scheme: Scheme::Hubspot,
        fingerprint: FingerprintRule::Body,
        event_id: None,
        body_key: true,
        event_type: Some(Location::Body("/0/subscriptionType")),
        event_time: Some((Location::Body("/0/occurredAt"), TimeFormat::UnixMilliseconds)),
        retry_horizon_s: Some(24 * HOUR),
        replay_guard: false,
        handshake: None,
        response_deadline_ms: Some(2_000),
        retries_4xx: Retries4xx::Partly("400, 401, 403, 404 and 405 are never retried, 429 is (after Retry-After); workflow webhooks retry no 4xx but 429"),
        disable_rule: "Not documented.",
        stop_signal: None,
        notes: "A request is a JSON array of up to 100 notifications, each with its own eventId (which HubSpot does not guarantee unique) and attemptNumber (which grows with every retry): no id names the request, so deliveries are keyed on the body. A byte-identical replay is a duplicate, but HubSpot's own retry is other bytes and is processed again: to deduplicate retries, claim each notification (webhook_claim, keyed on portalId, subscriptionId and eventId). Type and time are the first notification's. Up to 10 retries spread over 24 hours. The request time is signed (5-minute window).",
        sources: "https://developers.hubspot.com/docs/api/webhooks ; https://developers.hubspot.com/docs/api/webhooks/validating-requests ; https://community.hubspot.com/t5/APIs-Integrations/Webhooks-response/td-p/277558 (the Webhooks API's timeout: \"longer than 2 second\"; no current figure is published) ; https://developers.hubspot.com/docs/methods/workflows/webhook_information",
    },
    Profile {
        scheme: Scheme::Twitch,
        fingerprint: FingerprintRule::Body,
        event_id: Some(Location::Headers(&["twitch-eventsub-message-id"])),
        body_key: false,
        event_type: Some(Location::Headers(&["twitch-eventsub-subscription-type"])),
        event_time: Some((Location::Headers(&["twitch-eventsub-message-timestamp"]), TimeFormat::Rfc3339)),
        retry_horizon_s: Some(10 * MINUTE),
        replay_guard: false,
        handshake: None,
        response_deadline_ms: None,
        retries_4xx: Retries4xx::Undocumented,
        disable_rule: "A subscription that too often fails to answer within a few seconds is revoked (notification_failures_exceeded).",
        stop_signal: None,
        notes: "A resent message keeps its Twitch-Eventsub-Message-Id; the id and the message timestamp (when Twitch sent it, not when the event happened) are signed. Twitch documents no retry horizon: 10 minutes is its replay rule (reject messages older than 10 minutes, and ids already seen). Twitch-Eventsub-Message-Type tells notification, webhook_callback_verification and revocation apart; the challenge of webhook_callback_verification is answered as plain text by the receiver, not by webhook_receive (which keys it on its message id like any message).",
        sources: "https://dev.twitch.tv/docs/eventsub/handling-webhook-events/ (\"respond to notification requests within a few seconds\"; notification_failures_exceeded) ; https://dev.twitch.tv/docs/eventsub/",
    },
    Profile {
        scheme: Scheme::Intercom,
        // A resent notification keeps its id, but its delivery fields
        // (delivery_attempts, delivery_status, first_sent_at, delivered_at)
        // describe the attempt; topic and data are the event itself.
        fingerprint: FingerprintRule::Pointers(&["/topic", "/data"]),
        event_id: Some(Location::Body("/id")),
        body_key: false,
        event_type: Some(Location::Body("/topic")),
        event_time: Some((Location::Body("/created_at"), TimeFormat::UnixSeconds)),
        retry_horizon_s: Some(2 * HOUR),
        replay_guard: false,
        handshake: None,
        response_deadline_ms: Some(5_000),
        retries_4xx: Retries4xx::Yes,
        disable_rule: "Notifications of a topic are paused for 15 minutes after more than 1,000 consecutive errors within 15 minutes; a private app's subscription is suspended after seven days of errors.",
        stop_signal: None,
        notes: "A notification not answered 200 within 5 seconds is sent again with the same id (notif_...), which is in the signed body. Notifications throttled by an HTTP 429 are dropped after 2 hours; notifications queued during an Intercom incident are sent when it ends, possibly later.",
        sources: "https://developers.intercom.com/docs/webhooks/webhook-notifications (a HTTP 200 \"within 5000ms\"; pause and suspension) ; https://developers.intercom.com/docs/references/webhooks/webhook-models",
    },
    Profile {
        scheme: Scheme::Typeform,
        fingerprint: FingerprintRule::Body,
        event_id: Some(Location::Body("/event_id")),
        body_key: false,
        event_type: Some(Location::Body("/event_type")),
        event_time: Some((Location::Body("/form_response/submitted_at"), TimeFormat::Rfc3339)),
        retry_horizon_s: Some(10 * HOUR + 35 * MINUTE),
        replay_guard: false,
        handshake: None,
        response_deadline_ms: Some(30_000),
        retries_4xx: Retries4xx::Partly("429, 408, 503 and 423 every 2 to 3 minutes for 10 hours, any other status five times; 404 and 410 are not retried and disable the webhook"),
        disable_rule: "A 404 or 410 answer disables the webhook at once.",
        stop_signal: None,
        notes: "event_id is in the signed body. After a 429, 408, 503 or 423 Typeform retries every 2 to 3 minutes for 10 hours; after another failure, 5 min, 10 min, 20 min, 1 h, 2 h, 3 h and 4 h later (10 h 35 min if each delay follows the previous attempt); a 404 or 410 disables the webhook.",
        sources: "https://www.typeform.com/developers/webhooks/ (\"If your webhook doesn't respond within 30 seconds\"; the statuses retried and the ones that disable) ; https://www.typeform.com/developers/webhooks/secure-your-webhooks/",
    },
    Profile {
        scheme: Scheme::Calendly,
        fingerprint: FingerprintRule::Body,
        event_id: None,
        body_key: true,
        event_type: Some(Location::Body("/event")),
        event_time: Some((Location::Body("/created_at"), TimeFormat::Rfc3339)),
        retry_horizon_s: Some(24 * HOUR),
        replay_guard: false,
        handshake: None,
        response_deadline_ms: Some(15_000),
        retries_4xx: Retries4xx::Yes,
        disable_rule: "Disabled when no message was delivered for 24 hours of errors; it must be created again.",
        stop_signal: None,
        notes: "Calendly sends no event id (payload.uri names the invitee, which its invitee.created and invitee.canceled share): deliveries are keyed on the body. Errors are retried for 24 hours with exponential back-off, then the subscription is disabled. The signed t is the attempt's time (180-second window, from Calendly's example code).",
        sources: "https://developer.calendly.com/api-docs/overview/webhooks/webhook-errors ; https://developer.calendly.com/api-docs/overview/webhooks/webhook-signatures ; https://developer.calendly.com/api-docs/overview/webhooks/webhook-timeouts (read timeout 15 seconds)",
    },
    // Public-key and body-signed schemes (discord, sendgrid, mailgun,
    // linear): one block, appended together.
    Profile {
        scheme: Scheme::Discord,
        fingerprint: FingerprintRule::Body,
        event_id: Some(Location::Body("/id")),
        body_key: false,
        event_type: Some(Location::Body("/type")),
        event_time: Some((Location::Header("x-signature-timestamp"), TimeFormat::UnixSeconds)),
        retry_horizon_s: None,
        replay_guard: false,
        handshake: Some("PING (an interaction of \"type\": 1): answered {\"type\": 1} (PONG)"),
        response_deadline_ms: Some(3_000),
        retries_4xx: Retries4xx::Partly("Discord does not retry an interaction"),
        disable_rule: "The interactions URL is removed when it fails Discord's security checks, which send invalid signatures and expect 401.",
        stop_signal: None,
        notes: "Interactions over HTTP. The id (a snowflake) is in the signed body and the time is signed: no replay guard needed. The type is the interaction type as a number (1 PING, 2 application command, 3 message component, 4 autocomplete, 5 modal submit). Discord does not retry an interaction: it waits 3 seconds for the answer, so the signed X-Signature-Timestamp is the event's time.",
        sources: "https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint ; https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object ; https://discord.com/developers/docs/interactions/overview (\"your app should respond with a 401 error code\")",
    },
    Profile {
        scheme: Scheme::Sendgrid,
        fingerprint: FingerprintRule::Body,
        event_id: None,
        body_key: true,
        event_type: None,
        event_time: None,
        retry_horizon_s: Some(DAY),
        replay_guard: false,
        handshake: None,
        response_deadline_ms: None,
        retries_4xx: Retries4xx::Yes,
        disable_rule: "Not documented.",
        stop_signal: None,
        notes: "The body is a JSON array of events (a batch): no id, type or time for the delivery as a whole, so deliveries are keyed on the body, and each event's own sg_event_id is the key to claim it by (webhook_claim per event). The time is signed. Failed POSTs are retried at increasing intervals for up to 24 hours after the event.",
        sources: "https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features ; https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/troubleshooting ; https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/event ; https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook (\"If your web server does not return a 2xx response type, we will retry\")",
    },
    Profile {
        scheme: Scheme::Mailgun,
        // A retry is signed anew (its own timestamp, token and signature):
        // the signature block is left out of what identifies the content.
        fingerprint: FingerprintRule::Pointers(&["/event-data"]),
        event_id: Some(Location::Body("/event-data/id")),
        body_key: false,
        event_type: Some(Location::Body("/event-data/event")),
        event_time: None,
        retry_horizon_s: Some(8 * HOUR),
        replay_guard: false,
        handshake: None,
        response_deadline_ms: None,
        retries_4xx: Retries4xx::Partly("every status but 406, which rejects the POST; delivered-event webhooks are not retried"),
        disable_rule: "Not documented.",
        stop_signal: Some(StopSignal::Status(406)),
        notes: "The signature covers the signature block's timestamp and token only, not the event data (nor its id): webhook_receive binds each signed token to the bytes it first arrived with and refuses it on other content (reject_reason token_reused). event-data.timestamp is fractional Unix seconds, which no event time format reads. Retries (other than for delivery notifications) after 5, 10 and 15 minutes, 1, 2 and 4 hours: 8 hours; a 406 answer stops them.",
        sources: "https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks ; https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/webhook-retries (\"If Mailgun receives a 406 (Not Acceptable) code, Mailgun will determine the POST is rejected and not retry\"; only 200 is success)",
    },
    Profile {
        scheme: Scheme::Linear,
        // webhookTimestamp is the time of each attempt: a retry differs in
        // it, so it is left out of what identifies the content.
        fingerprint: FingerprintRule::Pointers(&["/action", "/type", "/data", "/updatedFrom"]),
        event_id: Some(Location::Header("linear-delivery")),
        body_key: false,
        event_type: Some(Location::Body("/type")),
        event_time: Some((Location::Body("/createdAt"), TimeFormat::Rfc3339)),
        retry_horizon_s: Some(7 * HOUR + MINUTE),
        replay_guard: true,
        handshake: None,
        response_deadline_ms: Some(5_000),
        retries_4xx: Retries4xx::Yes,
        disable_rule: "Not documented.",
        stop_signal: None,
        notes: "Linear-Delivery (a UUID) identifies the delivery; the time (webhookTimestamp, milliseconds) is in the signed body, the id header is not signed. The type is the entity (Issue, Comment, ...) and action says create, update or remove. Retries after 1 minute, 1 hour and 6 hours.",
        sources: "https://linear.app/developers/webhooks ; https://github.com/linear/linear/blob/master/packages/sdk/src/webhooks/client.ts ; https://developers.linear.app/docs/graphql/webhooks (\"takes longer than 5s to respond, or responds with a non-200 HTTP status code\")",
    },
];

/// How `webhook_receive` reads one source's deliveries: its scheme's
/// profile, with what the source configures in its place
/// (`crate::intake::SourceIntake::apply`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules<'a> {
    pub event_id: Option<Location<'a>>,
    pub event_type: Option<Location<'a>>,
    pub event_time: Option<(Location<'a>, TimeFormat)>,
    pub fingerprint: FingerprintRule<'a>,
    pub replay_guard: bool,
    /// Key deliveries on the body when they carry no event id.
    pub body_key: bool,
}

impl Rules<'static> {
    /// The rules of a scheme without a profile (`hmac`): no event id, type
    /// or time, the raw body's fingerprint, no replay guard.
    pub const NONE: Rules<'static> = Rules {
        event_id: None,
        event_type: None,
        event_time: None,
        fingerprint: FingerprintRule::Body,
        replay_guard: false,
        body_key: false,
    };

    /// The rules of `scheme`'s profile, else [`Rules::NONE`].
    pub fn of(scheme: Scheme) -> Rules<'static> {
        profile(scheme).map_or(Rules::NONE, |p| Rules {
            event_id: p.event_id,
            event_type: p.event_type,
            event_time: p.event_time,
            fingerprint: p.fingerprint,
            replay_guard: p.replay_guard,
            body_key: p.body_key,
        })
    }
}

/// The profile of `scheme`, if it has one.
pub fn profile(scheme: Scheme) -> Option<&'static Profile> {
    PROFILES.iter().find(|p| p.scheme == scheme)
}

/// What a delivery says about itself, by its profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extracted {
    pub event_id: Option<String>,
    pub event_type: Option<String>,
    /// PostgreSQL timestamp (microseconds since 2000-01-01 UTC).
    pub event_time: Option<i64>,
}

/// A delivery's body, parsed as JSON only when a profile needs it (and at
/// most once).
pub struct Body<'a> {
    raw: &'a [u8],
    parsed: std::cell::OnceCell<Option<Value>>,
}

impl<'a> Body<'a> {
    pub fn new(raw: &'a [u8]) -> Self {
        Body { raw, parsed: std::cell::OnceCell::new() }
    }

    pub(crate) fn json(&self) -> Option<&Value> {
        self.parsed.get_or_init(|| serde_json::from_slice(self.raw).ok()).as_ref()
    }
}

/// A header the delivery's event id, type or time is read from was sent
/// more than once: which value is the provider's cannot be told, so
/// `webhook_receive` refuses the delivery (`reject_reason =
/// 'repeated_header'`, answered 400 like a missing id). No provider
/// sends these headers twice; a proxy or a forger may.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepeatedHeader {
    /// The header's name, lower-cased.
    pub header: String,
}

/// The value at `location`, as text: a string as is, a number as written,
/// anything else (or nothing, or an empty string) `None`; a header sent
/// more than once is [`RepeatedHeader`] (of alternative names, the first
/// one sent decides).
fn value(location: Location<'_>, headers: &Headers, body: &Body<'_>) -> Result<Option<String>, RepeatedHeader> {
    let one = |name: &str| match headers.all(name) {
        [] => Ok(None),
        [value] => Ok(Some(value.clone())),
        _ => Err(RepeatedHeader { header: name.to_string() }),
    };
    let text = match location {
        Location::Headers(names) => {
            names.iter().find(|n| !headers.all(n).is_empty()).map_or(Ok(None), |name| one(name))?
        }
        Location::Header(name) => one(name)?,
        Location::Body(pointer) => body.json().and_then(|json| json.pointer(pointer)).and_then(|v| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }),
    };
    Ok(text.map(|t| t.trim().to_string()).filter(|t| !t.is_empty()))
}

/// Parse an event time; `None` when it is not in the profile's format.
pub fn parse_time(text: &str, format: TimeFormat) -> Option<i64> {
    let unix_us: i128 = match format {
        TimeFormat::UnixSeconds => i128::from(crate::signature::parse_unix_seconds(text)?) * 1_000_000,
        TimeFormat::UnixMilliseconds => {
            if text.is_empty() || text.len() > 15 || !text.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            i128::from(text.parse::<i64>().ok()?) * 1_000
        }
        TimeFormat::Rfc3339 => {
            let t = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
            t.unix_timestamp_nanos() / 1_000
        }
    };
    i64::try_from(unix_us - i128::from(crate::calendar::PG_EPOCH_UNIX_S) * 1_000_000).ok()
}

/// Read a delivery by `rules`: its event id, type and time, each `None`
/// when absent (a time also when not in the rule's format); a header any
/// of them is read from that was sent more than once is
/// [`RepeatedHeader`].
pub fn extract(rules: &Rules<'_>, headers: &Headers, body: &Body<'_>) -> Result<Extracted, RepeatedHeader> {
    let read = |location: Option<Location<'_>>| location.map_or(Ok(None), |l| value(l, headers, body));
    Ok(Extracted {
        event_id: read(rules.event_id)?,
        event_type: read(rules.event_type)?,
        event_time: read(rules.event_time.map(|(l, _)| l))?
            .and_then(|t| rules.event_time.and_then(|(_, format)| parse_time(&t, format))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calendar::PG_EPOCH_UNIX_S;

    fn pg(unix: i64) -> i64 {
        (unix - PG_EPOCH_UNIX_S) * 1_000_000
    }

    #[test]
    fn every_signing_scheme_but_hmac_has_one_profile() {
        for scheme in Scheme::ALL {
            let n = PROFILES.iter().filter(|p| p.scheme == scheme).count();
            assert_eq!(n, usize::from(scheme != Scheme::Hmac), "{scheme:?}");
        }
        for p in PROFILES {
            assert!(p.sources.starts_with("https://"), "{:?}", p.scheme);
            assert!(p.event_id.is_some() != p.body_key, "{:?}: an event id, or keyed on the body", p.scheme);
        }
    }

    /// A Stripe event re-rendered for a retry (pending_webhooks, request
    /// and the members' order changed) has the first attempt's
    /// fingerprint; another type or data has another.
    #[test]
    fn stripe_fingerprints_ignore_what_a_retry_rerenders() {
        let rule = profile(Scheme::Stripe).unwrap().fingerprint;
        let first = br#"{"id":"evt_X","object":"event","type":"invoice.paid","pending_webhooks":2,
                         "request":{"id":"req_1"},"data":{"object":{"id":"in_1","amount":100}}}"#;
        let retry = br#"{"data":{"object":{"amount":100,"id":"in_1"}},"id":"evt_X","object":"event",
                         "type":"invoice.paid","pending_webhooks":1,"request":{"id":null}}"#;
        let other = br#"{"id":"evt_X","object":"event","type":"invoice.paid","pending_webhooks":1,
                         "data":{"object":{"id":"in_1","amount":200}}}"#;
        let fp = |b: &[u8]| rule.fingerprint(&Body::new(b));
        assert_eq!(fp(first), fp(retry));
        assert_ne!(fp(first), fp(other));
        assert_eq!(fp(b"not json"), Fingerprint::raw(b"not json"), "falls back to the body");
        assert_eq!((fp(first).as_bytes().len(), fp(first).as_bytes()[0]), (33, CANONICAL_TAG), "tagged");
        assert_eq!(rule.describe(), "canonical JSON (RFC 8785) of /type, /data");
        // the raw-body rule of the others
        let github = profile(Scheme::Github).unwrap().fingerprint;
        assert_eq!(github.fingerprint(&Body::new(first)).as_bytes(), crate::signature::ct::sha256(first));
    }

    /// RFC 8785 writes every number as an IEEE double, so two covered
    /// values that differ only in an integer above 2^53 (Shopify-style
    /// 64-bit numeric ids) would get one fingerprint, and a conflicting
    /// delivery would be a duplicate: such a body is hashed raw.
    #[test]
    fn integers_beyond_2_pow_53_keep_fingerprints_apart() {
        let rule = FingerprintRule::Pointers(&["/data"]);
        let a = br#"{"data":{"order_id":820982911946154508}}"#;
        let b = br#"{"data":{"order_id":820982911946154509}}"#;
        assert_ne!(rule.fingerprint(&Body::new(a)), rule.fingerprint(&Body::new(b)), "different orders");
    }

    /// The raw-bytes fallback compares a stored fingerprint with the
    /// fingerprint of the new raw bytes: a body whose bytes are the first
    /// body's canonical text must not pass for byte-identical (the tag and
    /// the length keep the two kinds apart).
    #[test]
    fn raw_and_canonical_fingerprints_never_match() {
        let pointers = ["/data".to_string()];
        let rule = FingerprintRule::Configured(&pointers);
        let first = br#"{"data":1,"attempt":1}"#;
        let stored = rule.fingerprint(&Body::new(first)); // sha256({"/data":1})
        let later = br#"{"/data":1}"#; // covers no /data: fingerprint of {}
        let fingerprint = rule.fingerprint(&Body::new(later));
        assert_ne!(stored, fingerprint, "under the rule, a conflict");
        let raw = Fingerprint::raw(later);
        let decided =
            crate::claim::same_bytes(Some(stored.as_bytes()), Some(fingerprint.as_bytes()), Some(raw.as_bytes()));
        assert_eq!(
            decided,
            Some(fingerprint.as_bytes()),
            "the raw fallback must not turn the conflict into a duplicate"
        );
    }

    /// The default wait is the deadline less a fifth of it, at least 1 s
    /// (about 2 s for Slack and Zoom, 4 s for Shopify and Paddle, 8 s
    /// for GitHub and Square), and every profile says what repeated
    /// failures do.
    #[test]
    fn default_waits_leave_a_margin_before_the_deadline() {
        let wait = |scheme| default_wait_ms(profile(scheme));
        assert_eq!((wait(Scheme::Slack), wait(Scheme::Zoom)), (2_000, 2_000));
        assert_eq!((wait(Scheme::Shopify), wait(Scheme::Paddle)), (4_000, 4_000));
        assert_eq!((wait(Scheme::Github), wait(Scheme::Square)), (8_000, 8_000));
        assert_eq!(wait(Scheme::Hubspot), 1_000, "2 s");
        assert_eq!(wait(Scheme::Stripe), 2_000, "undocumented: the assumed 3 s");
        assert_eq!(default_wait_ms(None), 2_000, "hmac");
        for p in PROFILES {
            let deadline = p.response_deadline_ms.unwrap_or(ASSUMED_DEADLINE_MS);
            assert!((0..deadline).contains(&default_wait_ms(Some(&p))), "{:?}", p.scheme);
            assert!(!p.disable_rule.is_empty(), "{:?}", p.scheme);
        }
    }

    #[test]
    fn stripe_reads_the_body() {
        let body = br#"{"id":"evt_1","type":"invoice.paid","created":1700000000}"#;
        let got = extract(&Rules::of(Scheme::Stripe), &Headers::default(), &Body::new(body)).unwrap();
        assert_eq!(
            got,
            Extracted {
                event_id: Some("evt_1".into()),
                event_type: Some("invoice.paid".into()),
                event_time: Some(pg(1_700_000_000))
            }
        );
    }

    #[test]
    fn shopify_falls_back_to_the_webhook_id_and_reads_rfc3339() {
        let headers = Headers::from_pairs([
            ("X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"),
            ("X-Shopify-Topic", "orders/create"),
            ("X-Shopify-Triggered-At", "2023-03-29T18:00:27.877041743Z"),
        ]);
        let got = extract(&Rules::of(Scheme::Shopify), &headers, &Body::new(b"{}")).unwrap();
        assert_eq!(got.event_id.as_deref(), Some("b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"));
        assert_eq!(got.event_time, Some(pg(1_680_112_827) + 877_041));
        let both = Headers::from_pairs([("X-Shopify-Webhook-Id", "w"), ("X-Shopify-Event-Id", "e")]);
        let got = extract(&Rules::of(Scheme::Shopify), &both, &Body::new(b"")).unwrap();
        assert_eq!(got.event_id.as_deref(), Some("e"), "the event id wins");
    }

    /// A header the event id, type or time is read from, sent twice, is
    /// refused whichever value comes first; a repeated header the profile
    /// does not read changes nothing.
    #[test]
    fn a_repeated_id_type_or_time_header_is_refused() {
        let github = Rules::of(Scheme::Github);
        let twice = |name: &'static str| {
            let mut pairs = vec![("X-GitHub-Delivery", "d-1"), ("X-GitHub-Event", "push"), (name, "other")];
            pairs.sort_by_key(|(n, _)| *n != name); // the repeated value first, then the genuine one
            Headers::from_pairs(pairs)
        };
        for name in ["X-GitHub-Delivery", "X-GitHub-Event"] {
            let got = extract(&github, &twice(name), &Body::new(b"{}"));
            assert_eq!(got, Err(RepeatedHeader { header: name.to_ascii_lowercase() }), "{name}");
        }
        let same_twice = Headers::from_pairs([("X-GitHub-Delivery", "d-1"), ("x-github-delivery", "d-1")]);
        assert!(extract(&github, &same_twice, &Body::new(b"{}")).is_err(), "even the same value twice");
        let other = Headers::from_pairs([("X-GitHub-Delivery", "d-1"), ("Accept", "a"), ("Accept", "b")]);
        assert_eq!(extract(&github, &other, &Body::new(b"{}")).unwrap().event_id.as_deref(), Some("d-1"));
        // of alternative names, the one sent decides: Shopify's event id
        // twice is refused, its webhook id (not read then) may repeat
        let shopify = Rules::of(Scheme::Shopify);
        let ids = Headers::from_pairs([("X-Shopify-Event-Id", "e"), ("X-Shopify-Event-Id", "f")]);
        assert!(extract(&shopify, &ids, &Body::new(b"")).is_err());
        let time = Headers::from_pairs([
            ("X-Shopify-Event-Id", "e"),
            ("X-Shopify-Triggered-At", "2023-03-29T18:00:27Z"),
            ("X-Shopify-Triggered-At", "2023-03-29T18:00:28Z"),
        ]);
        assert_eq!(
            extract(&shopify, &time, &Body::new(b"")),
            Err(RepeatedHeader { header: "x-shopify-triggered-at".into() })
        );
        // an id in the body is not a header: a repeated header elsewhere is no matter
        let stripe = Headers::from_pairs([("Stripe-Signature", "a"), ("Stripe-Signature", "b")]);
        let got = extract(&Rules::of(Scheme::Stripe), &stripe, &Body::new(br#"{"id":"evt_1"}"#)).unwrap();
        assert_eq!(got.event_id.as_deref(), Some("evt_1"));
    }

    /// Twitch's message headers: the id, the subscription type and the
    /// RFC 3339 message time with nanoseconds (microseconds kept).
    #[test]
    fn twitch_reads_its_message_headers() {
        let headers = Headers::from_pairs([
            ("Twitch-Eventsub-Message-Id", "befa7b53-d79d-478f-86b9-120f112b044e"),
            ("Twitch-Eventsub-Subscription-Type", "channel.follow"),
            ("Twitch-Eventsub-Message-Timestamp", "2019-11-16T10:11:12.634234626Z"),
        ]);
        let got = extract(&Rules::of(Scheme::Twitch), &headers, &Body::new(b"{}")).unwrap();
        assert_eq!(
            got,
            Extracted {
                event_id: Some("befa7b53-d79d-478f-86b9-120f112b044e".into()),
                event_type: Some("channel.follow".into()),
                event_time: Some(pg(1_573_899_072) + 634_234),
            }
        );
    }

    /// HubSpot sends an array: type and time are the first notification's,
    /// and the request is keyed on its body (no id).
    #[test]
    fn hubspot_reads_the_first_notification() {
        let body =
            br#"[{"eventId":1,"subscriptionType":"contact.creation","occurredAt":1700000000123,"attemptNumber":0},
                        {"eventId":2,"subscriptionType":"deal.creation","occurredAt":1700000000999}]"#;
        let rules = Rules::of(Scheme::Hubspot);
        assert!(rules.body_key && rules.event_id.is_none());
        let got = extract(&rules, &Headers::default(), &Body::new(body)).unwrap();
        assert_eq!(got.event_type.as_deref(), Some("contact.creation"));
        assert_eq!(got.event_time, Some(pg(1_700_000_000) + 123_000));
    }

    /// Intercom's delivery fields change between attempts of one
    /// notification; its topic and data do not.
    #[test]
    fn intercom_fingerprints_ignore_the_delivery_fields() {
        let rule = profile(Scheme::Intercom).unwrap().fingerprint;
        let first = br#"{"type":"notification_event","id":"notif_1","topic":"conversation.user.created",
                         "data":{"item":{"id":"1"}},"delivery_attempts":1,"first_sent_at":1700000000,"created_at":1700000000}"#;
        let again = br#"{"type":"notification_event","id":"notif_1","topic":"conversation.user.created",
                         "data":{"item":{"id":"1"}},"delivery_attempts":2,"first_sent_at":1700000000,"created_at":1700000000}"#;
        let other = br#"{"type":"notification_event","id":"notif_1","topic":"conversation.user.created",
                         "data":{"item":{"id":"2"}},"delivery_attempts":1,"first_sent_at":1700000000,"created_at":1700000000}"#;
        let fp = |b: &[u8]| rule.fingerprint(&Body::new(b));
        assert_eq!(fp(first), fp(again));
        assert_ne!(fp(first), fp(other));
        let got = extract(&Rules::of(Scheme::Intercom), &Headers::default(), &Body::new(first)).unwrap();
        assert_eq!(got.event_id.as_deref(), Some("notif_1"));
        assert_eq!(got.event_time, Some(pg(1_700_000_000)));
    }

    #[test]
    fn square_typeform_and_calendly_read_the_body() {
        let square = br#"{"merchant_id":"M","type":"payment.updated","event_id":"ac3ac95b","created_at":"2022-07-13T20:30:59.037339943Z"}"#;
        let got = extract(&Rules::of(Scheme::Square), &Headers::default(), &Body::new(square)).unwrap();
        assert_eq!(got.event_id.as_deref(), Some("ac3ac95b"));
        assert_eq!(got.event_type.as_deref(), Some("payment.updated"));
        assert_eq!(got.event_time, Some(pg(1_657_744_259) + 37_339));
        let typeform = br#"{"event_id":"01HF","event_type":"form_response","form_response":{"submitted_at":"2023-11-14T22:13:20Z"}}"#;
        let got = extract(&Rules::of(Scheme::Typeform), &Headers::default(), &Body::new(typeform)).unwrap();
        assert_eq!(
            got,
            Extracted {
                event_id: Some("01HF".into()),
                event_type: Some("form_response".into()),
                event_time: Some(pg(1_700_000_000))
            }
        );
        let calendly = br#"{"event":"invitee.created","created_at":"2023-11-14T22:13:20.000000Z","payload":{}}"#;
        let got = extract(&Rules::of(Scheme::Calendly), &Headers::default(), &Body::new(calendly)).unwrap();
        assert_eq!(got.event_id, None, "keyed on the body");
        assert!(Rules::of(Scheme::Calendly).body_key);
        assert_eq!(got.event_time, Some(pg(1_700_000_000)));
    }

    /// The replay guard is for schemes that sign neither the id nor a time:
    /// Square, Intercom and Typeform sign the id (in the body), HubSpot,
    /// Twitch and Calendly a time; GitHub, Shopify, Linear and Twilio read
    /// their id from a header they do not sign.
    #[test]
    fn unsigned_ids_get_the_replay_guard() {
        for scheme in [Scheme::Github, Scheme::Shopify, Scheme::Linear, Scheme::Twilio] {
            let p = profile(scheme).unwrap();
            assert!(p.replay_guard, "{scheme:?}");
            assert!(matches!(p.event_id, Some(Location::Headers(_) | Location::Header(_))), "{scheme:?}");
        }
    }

    #[test]
    fn new_schemes_need_no_replay_guard() {
        for scheme in
            [Scheme::Square, Scheme::Hubspot, Scheme::Twitch, Scheme::Intercom, Scheme::Typeform, Scheme::Calendly]
        {
            let p = profile(scheme).unwrap();
            assert!(!p.replay_guard, "{scheme:?}");
            assert!(p.retry_horizon_s.is_some(), "{scheme:?}");
        }
    }

    /// The asymmetric and body-signed schemes' profiles read their
    /// providers' documented payloads.
    #[test]
    fn discord_sendgrid_mailgun_and_linear_read_their_payloads() {
        let ping =
            br#"{"id":"787053080478613555","token":"ThisIsATokenFromDiscordThatIsVeryLong","type":1,"version":1}"#;
        let headers = Headers::from_pairs([("X-Signature-Timestamp", "1700000000")]);
        let got = extract(&Rules::of(Scheme::Discord), &headers, &Body::new(ping)).unwrap();
        assert_eq!(
            got,
            Extracted {
                event_id: Some("787053080478613555".into()),
                event_type: Some("1".into()),
                event_time: Some(pg(1_700_000_000))
            }
        );
        let batch = br#"[{"email":"a@b.c","event":"dropped","sg_event_id":"e1","timestamp":1600112492}]"#;
        let rules = Rules::of(Scheme::Sendgrid);
        assert!(rules.body_key);
        assert_eq!(extract(&rules, &Headers::default(), &Body::new(batch)).unwrap(), Extracted::default());
        let mailgun = br#"{"signature":{"timestamp":"1403645220","token":"t1","signature":"00"},
                          "event-data":{"id":"CPgfbmQMTCKtHW6uIWtuVe","event":"delivered","timestamp":1403645220.908181}}"#;
        let got = extract(&Rules::of(Scheme::Mailgun), &Headers::default(), &Body::new(mailgun)).unwrap();
        assert_eq!(
            (got.event_id.as_deref(), got.event_type.as_deref()),
            (Some("CPgfbmQMTCKtHW6uIWtuVe"), Some("delivered"))
        );
        // A retry is signed anew: another signature block, one fingerprint.
        let retry =
            br#"{"event-data":{"event":"delivered","timestamp":1403645220.908181,"id":"CPgfbmQMTCKtHW6uIWtuVe"},
                        "signature":{"timestamp":"1403645520","token":"t2","signature":"11"}}"#;
        let rule = profile(Scheme::Mailgun).unwrap().fingerprint;
        assert_eq!(rule.fingerprint(&Body::new(mailgun)), rule.fingerprint(&Body::new(retry)));
        let linear = br#"{"action":"create","type":"Issue","createdAt":"2023-11-14T22:13:19.000Z","data":{"id":"i1"},"webhookTimestamp":1700000000000}"#;
        let headers = Headers::from_pairs([("Linear-Delivery", "0a0e5c3e-8f41-4a49-9b6b-0b2b6f1c1a11")]);
        let got = extract(&Rules::of(Scheme::Linear), &headers, &Body::new(linear)).unwrap();
        assert_eq!(
            got,
            Extracted {
                event_id: Some("0a0e5c3e-8f41-4a49-9b6b-0b2b6f1c1a11".into()),
                event_type: Some("Issue".into()),
                event_time: Some(pg(1_699_999_999))
            }
        );
        let retried = br#"{"webhookTimestamp":1700003600000,"action":"create","type":"Issue","createdAt":"2023-11-14T22:13:19.000Z","data":{"id":"i1"}}"#;
        let rule = profile(Scheme::Linear).unwrap().fingerprint;
        assert_eq!(rule.fingerprint(&Body::new(linear)), rule.fingerprint(&Body::new(retried)), "a retry's new time");
        // Schemes that sign the id or key on the body need no guard.
        for scheme in [Scheme::Discord, Scheme::Sendgrid, Scheme::Mailgun] {
            assert!(!profile(scheme).unwrap().replay_guard, "{scheme:?} signs a time");
        }
    }

    #[test]
    fn missing_or_malformed_values_are_none() {
        let p = &Rules::of(Scheme::Paddle);
        assert_eq!(extract(p, &Headers::default(), &Body::new(b"not json")).unwrap(), Extracted::default());
        let body = br#"{"event_id":"","event_type":7,"occurred_at":"yesterday"}"#;
        let got = extract(p, &Headers::default(), &Body::new(body)).unwrap();
        assert_eq!(got, Extracted { event_id: None, event_type: Some("7".into()), event_time: None });
        assert_eq!(parse_time("1700000000000", TimeFormat::UnixSeconds), None, "milliseconds");
        assert_eq!(parse_time("2023-08-21T11:57:42.337Z", TimeFormat::Rfc3339), Some(pg(1_692_619_062) + 337_000));
        assert_eq!(parse_time("2023-08-21T13:57:42+02:00", TimeFormat::Rfc3339), Some(pg(1_692_619_062)));
    }

    /// Linear's id (Linear-Delivery) is an unsigned header, so a captured
    /// delivery re-sent within the 60 s window under a new Linear-Delivery
    /// would be a new key. Retries carry a new webhookTimestamp (a new raw
    /// body), so the replay guard, which keys on the raw body, refuses only
    /// such a replay.
    #[test]
    fn linear_keys_on_an_unsigned_header_so_its_replay_guard_is_on() {
        let p = profile(Scheme::Linear).unwrap();
        assert_eq!(p.event_id, Some(Location::Header("linear-delivery")));
        assert!(p.replay_guard, "a replayed body under a new Linear-Delivery would be processed again");
    }
}
