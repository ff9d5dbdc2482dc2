//! Webhook signature verification, one file per provider scheme, over the
//! raw body bytes exactly as received. Pure Rust: no Postgres in here.
//!
//! The policy every scheme follows (`docs/signatures.md`; it is the policy
//! the shared test vectors in `tests/vectors/` encode):
//! - any configured secret matching any presented signature passes
//!   (secret rotation on either side);
//! - only the scheme's own version tag counts; other tags are skipped and
//!   never compared as an HMAC;
//! - optional whitespace around list elements is trimmed; a malformed list
//!   element is skipped; a duplicated or malformed timestamp rejects the
//!   whole header;
//! - hex decodes case-insensitively, base64 only in its canonical padded
//!   form; comparisons are constant-time over decoded bytes of equal length
//!   ([`ct::equal`]);
//! - timestamp windows are symmetric with an inclusive bound:
//!   `|now - t| > tolerance` rejects;
//! - a secret that is empty, decodes to nothing, or carries leading or
//!   trailing whitespace is a configuration error (22023), never a silent
//!   mismatch;
//! - public keys (Standard Webhooks `whpk_`, Discord, SendGrid) are
//!   configured in the same `secrets`; a key that is not a key of its kind
//!   is a 22023 naming its position, and each key checks only signatures
//!   of its own kind. Public-key signatures are verified, not compared
//!   ([`asymmetric`]: strict Ed25519, strict DER for ECDSA).

// first: its registration macros serve the scheme modules below
#[macro_use]
pub mod scheme;
pub mod asymmetric;
pub mod calendly;
pub mod ct;
pub mod discord;
mod frame;
pub mod generic;
pub mod github;
pub mod headers;
pub mod hubspot;
pub mod intercom;
pub mod linear;
pub mod mailgun;
pub mod paddle;
#[cfg(test)]
mod properties;
pub mod sendgrid;
pub mod shopify;
pub mod sign;
pub mod slack;
pub mod square;
pub mod standard;
pub mod stripe;
pub mod twilio;
pub mod twitch;
pub mod twitter;
pub mod typeform;
#[cfg(any(test, feature = "test-vectors"))]
pub mod vectors;
pub mod zoom;

use crate::error::Error;
pub use ct::Algorithm;
pub(crate) use frame::TaggedHeader;
pub use frame::TimestampedHeader;
pub use frame::TimestampedList;
pub use frame::{OtherTag, TaggedFrame};
pub use headers::Headers;
pub use scheme::{Check, Scheme};
pub use sign::{check_signable, sign, SignRequest, Signed};

/// What a scheme's signature covers of the body it arrived with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// The raw body bytes, exactly.
    Bytes,
    /// Its content, not its bytes (Twilio's form parameters are signed
    /// sorted by name, so their order in the body is not).
    Content,
    /// None of it: the signature proves that the provider sent a request,
    /// not which (Mailgun). The signed token is bound to the bytes it
    /// first arrived with ([`signed_token`], `webhook_dedup.signature_tokens`).
    Nothing,
}

/// For a scheme whose signature covers the body's content but not its
/// bytes ([`Coverage::Content`]: Twilio), the signed text in one canonical
/// form ([`twilio::signed_text`]): what the replay guard and the
/// fingerprint key such deliveries on, so that re-ordering or re-encoding
/// a captured request does not make it new. `None` for other schemes, and
/// without the URL Twilio signs.
pub fn signed_content(scheme: Scheme, body: &[u8], url: Option<&str>) -> Option<Vec<u8>> {
    match scheme.coverage() {
        Coverage::Content => scheme.content(body, url),
        Coverage::Bytes | Coverage::Nothing => None,
    }
}

/// For a scheme whose signature covers nothing of the body
/// ([`Coverage::Nothing`]), the signed token that identifies the signature
/// (Mailgun: `signature.token`), read from a delivery that verified.
pub fn signed_token(scheme: Scheme, body: &[u8]) -> Option<String> {
    match scheme.coverage() {
        Coverage::Nothing => scheme.token(body),
        Coverage::Bytes | Coverage::Content => None,
    }
}

impl Scheme {
    /// Other names of [`Scheme::Standard`]: Svix, and providers that send
    /// Svix's `svix-*` headers and `whsec_` secrets (Clerk's `verifyWebhook`
    /// maps them to Standard Webhooks, <https://clerk.com/docs/reference/backend/verify-webhook>;
    /// Resend: <https://resend.com/docs/webhooks/verify-webhooks-requests>).
    pub const STANDARD_ALIASES: [&'static str; 3] = ["svix", "clerk", "resend"];

    /// Parse a scheme name (case-insensitive; `svix`, `clerk` and `resend`
    /// are `standard`). Unknown names are 22023.
    pub fn parse(name: &str) -> Result<Self, Error> {
        if Scheme::STANDARD_ALIASES.iter().any(|alias| alias.eq_ignore_ascii_case(name)) {
            return Ok(Scheme::Standard);
        }
        Scheme::ALL.into_iter().find(|s| s.name().eq_ignore_ascii_case(name)).ok_or_else(|| {
            Error::invalid_with_hint(
                format!("unknown webhook signature scheme \"{name}\""),
                format!(
                    "Supported schemes: {} (svix, clerk and resend are aliases of standard).",
                    Scheme::ALL.map(Scheme::name).join(", ")
                ),
            )
        })
    }
}

/// One configured secret or public key, decoded for its scheme.
#[derive(Clone, PartialEq, Eq)]
pub enum Key {
    /// The key of an HMAC: a shared secret.
    Mac(Vec<u8>),
    /// An Ed25519 public key (Standard Webhooks `whpk_`, Discord), checked
    /// by [`asymmetric::ed25519_key`].
    Ed25519(ed25519_dalek::VerifyingKey),
    /// An ECDSA P-256 public key (SendGrid).
    P256(p256::ecdsa::VerifyingKey),
}

impl std::fmt::Debug for Key {
    /// Never an HMAC key's bytes (public keys are no secret).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Key::Mac(_) => f.write_str("Mac(..)"),
            Key::Ed25519(k) => f.debug_tuple("Ed25519").field(k).finish(),
            Key::P256(k) => f.debug_tuple("P256").field(k).finish(),
        }
    }
}

impl Key {
    /// The HMAC key, if this is one.
    pub fn mac(&self) -> Option<&[u8]> {
        match self {
            Key::Mac(key) => Some(key),
            Key::Ed25519(_) | Key::P256(_) => None,
        }
    }
}

/// Why a delivery did or did not verify: a fixed vocabulary, stable in SQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Ok,
    /// The signature header (or a header the scheme signs) is absent.
    MissingHeader,
    /// A header is present but cannot be parsed (or is sent twice where
    /// one value is required).
    MalformedHeader,
    /// Only signatures with another version tag were presented.
    UnsupportedVersion,
    /// Well-formed signatures, none of which matches any secret (for Twilio
    /// JSON bodies: also a body hash that does not match).
    NoMatchingSignature,
    /// The signed timestamp is older than the tolerance.
    TimestampTooOld,
    /// The signed timestamp is further in the future than the tolerance.
    TimestampTooNew,
}

impl Reason {
    pub const ALL: [Reason; 7] = [
        Reason::Ok,
        Reason::MissingHeader,
        Reason::MalformedHeader,
        Reason::UnsupportedVersion,
        Reason::NoMatchingSignature,
        Reason::TimestampTooOld,
        Reason::TimestampTooNew,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Ok => "ok",
            Reason::MissingHeader => "missing_header",
            Reason::MalformedHeader => "malformed_header",
            Reason::UnsupportedVersion => "unsupported_version",
            Reason::NoMatchingSignature => "no_matching_signature",
            Reason::TimestampTooOld => "timestamp_too_old",
            Reason::TimestampTooNew => "timestamp_too_new",
        }
    }
}

/// The result of verifying one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub reason: Reason,
    /// Index (0-based) into the secrets of the secret that matched.
    pub secret_index: Option<usize>,
    /// The signed timestamp (Unix seconds, floored for schemes that sign a
    /// finer time), for schemes that have one.
    pub signed_at: Option<i64>,
}

impl Verdict {
    pub fn valid(&self) -> bool {
        self.reason == Reason::Ok
    }

    pub(crate) fn rejected(reason: Reason) -> Self {
        Verdict { reason, secret_index: None, signed_at: None }
    }

    /// The verdict of a timestamped scheme: the window is checked once a
    /// signature matched (so the reason says what is wrong with a genuine
    /// but stale delivery).
    /// `signed_at` in Unix seconds, `now` and `tolerance` in microseconds.
    pub(crate) fn timestamped(matched: Option<usize>, signed_at: i64, now: i64, tolerance: i64) -> Self {
        let reason = match matched {
            Some(_) => window(signed_at, now, tolerance),
            None => Reason::NoMatchingSignature,
        };
        Verdict { reason, secret_index: matched, signed_at: Some(signed_at) }
    }

    /// [`Verdict::timestamped`] for a scheme that signs a finer time
    /// (HubSpot's milliseconds, Twitch's RFC 3339 nanoseconds):
    /// `signed_at_ns` in Unix nanoseconds, compared exactly ([`window_ns`]);
    /// the verdict's `signed_at` is its whole second (floor).
    pub(crate) fn timestamped_ns(matched: Option<usize>, signed_at_ns: i128, now: i64, tolerance: i64) -> Self {
        let reason = match matched {
            Some(_) => window_ns(signed_at_ns, now, tolerance),
            None => Reason::NoMatchingSignature,
        };
        Verdict { reason, secret_index: matched, signed_at: Some(unix_seconds_of_ns(signed_at_ns)) }
    }
}

/// The whole Unix second (floor) of a time in Unix nanoseconds, saturated
/// to `i64` (a nanosecond time parsed from a header is at most 10^27).
pub(crate) fn unix_seconds_of_ns(ns: i128) -> i64 {
    let seconds = ns.div_euclid(1_000_000_000);
    i64::try_from(seconds).unwrap_or(if seconds < 0 { i64::MIN } else { i64::MAX })
}

/// One delivery to verify.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    /// The raw body bytes exactly as received.
    pub body: &'a [u8],
    pub headers: &'a Headers,
    /// The full request URL as the sender addressed it (Twilio, Square and
    /// HubSpot sign it).
    pub url: Option<&'a str>,
    /// The request method (`POST`), exactly as received: HubSpot signs it;
    /// every other scheme ignores it.
    pub method: Option<&'a str>,
}

/// How a generic HMAC header is built (scheme `hmac`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HmacSpec {
    /// The header carrying the signature (any case).
    pub header: String,
    /// A prefix before the encoded MAC, e.g. `sha256=`; may be empty.
    pub prefix: String,
    pub algorithm: Algorithm,
    pub encoding: Encoding,
}

/// How a MAC is written in a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Hex,
    Base64,
}

impl Encoding {
    pub fn parse(name: &str) -> Option<Encoding> {
        match name.to_ascii_lowercase().as_str() {
            "hex" => Some(Encoding::Hex),
            "base64" => Some(Encoding::Base64),
            _ => None,
        }
    }

    pub fn decode(self, text: &str, len: usize) -> Option<Vec<u8>> {
        match self {
            Encoding::Hex => ct::decode_hex(text, len),
            Encoding::Base64 => ct::decode_base64(text, Some(len)),
        }
    }

    pub fn encode(self, bytes: &[u8]) -> String {
        match self {
            Encoding::Hex => hex::encode(bytes),
            Encoding::Base64 => ct::encode_base64(bytes),
        }
    }
}

/// The widest replay window, microseconds: 365 days, the bound of
/// `webhook_dedup.sources.tolerance`.
pub const MAX_TOLERANCE_US: i64 = 365 * 86_400 * 1_000_000;

/// The verifier's configuration for one call.
#[derive(Clone)]
pub struct Config<'a> {
    /// Every currently valid secret, already checked by [`check_secrets`].
    pub secrets: Vec<&'a str>,
    /// Replay window in microseconds; `None` means the scheme's default.
    pub tolerance_us: Option<i64>,
    /// The verifier's clock, Unix time in microseconds (not rounded to
    /// seconds: a window is compared exactly, see [`window`]).
    pub now_us: i64,
    /// The generic scheme's header description (scheme `hmac` only).
    pub hmac: Option<HmacSpec>,
}

impl std::fmt::Debug for Config<'_> {
    /// Never the secrets: how many there are.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("secrets", &self.secrets.len())
            .field("tolerance_us", &self.tolerance_us)
            .field("now_us", &self.now_us)
            .field("hmac", &self.hmac)
            .finish()
    }
}

/// Check the configured secrets: at least one, none NULL, empty, or with
/// leading/trailing whitespace. Messages name the secret's position, never
/// its value.
pub fn check_secrets<'a>(secrets: &[Option<&'a str>]) -> Result<Vec<&'a str>, Error> {
    if secrets.is_empty() {
        return Err(Error::invalid("secrets must hold at least one secret"));
    }
    secrets
        .iter()
        .enumerate()
        .map(|(i, secret)| match secret {
            None => Err(Error::NullValue { what: "every element of secrets" }),
            Some(s) => check_secret(s)
                .map(|()| *s)
                .map_err(|problem| problem.named(&format!("secret {} of {}", i + 1, secrets.len()))),
        })
        .collect()
}

/// What is wrong with a secret, if anything (never its value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretProblem {
    Empty,
    Whitespace,
}

impl SecretProblem {
    /// The 22023 for a secret called `what` ("secret 2 of 3", "the secret").
    pub fn named(self, what: &str) -> Error {
        match self {
            SecretProblem::Empty => Error::invalid(format!("{what} is empty")),
            SecretProblem::Whitespace => Error::invalid_with_hint(
                format!("{what} has leading or trailing whitespace"),
                "Secrets are used byte for byte; a trailing newline copied from a file is the usual cause.",
            ),
        }
    }
}

/// Check one secret: not empty, no leading or trailing whitespace.
pub fn check_secret(secret: &str) -> Result<(), SecretProblem> {
    if secret.is_empty() {
        Err(SecretProblem::Empty)
    } else if secret.trim() != secret {
        Err(SecretProblem::Whitespace)
    } else {
        Ok(())
    }
}

/// The key of every secret under `scheme` (22023 naming the secret's
/// position when one cannot be a key).
pub fn keys(scheme: Scheme, secrets: &[&str]) -> Result<Vec<Key>, Error> {
    secrets
        .iter()
        .enumerate()
        .map(|(i, secret)| {
            scheme
                .key(secret)
                .map_err(|problem| Error::invalid(format!("secret {} of {} {problem}", i + 1, secrets.len())))
        })
        .collect()
}

/// The HMAC key of one secret, for signing (`webhook_sign`) and for the
/// handshakes whose answer is a MAC. A public key is 22023: it verifies
/// signatures but makes none.
pub fn secret_key(scheme: Scheme, secret: &str) -> Result<Vec<u8>, Error> {
    match keys(scheme, &[secret])?.remove(0) {
        Key::Mac(key) => Ok(key),
        Key::Ed25519(_) | Key::P256(_) => Err(Error::invalid_with_hint(
            format!(
                "secret 1 of 1 is a public key of scheme {}, which verifies signatures but cannot make them",
                scheme.name()
            ),
            "Signing needs the shared secret (for standard, a whsec_ secret: webhook_sign makes v1 signatures only).",
        )),
    }
}

/// Verify one delivery under `scheme`. Errors are misconfigurations (22023):
/// a bad secret, a negative tolerance, a missing `url` (Twilio, Square,
/// HubSpot), `method` (HubSpot) or [`HmacSpec`] (generic), or a `url` or
/// [`HmacSpec`] given to a scheme that does not use it (a `method` is
/// ignored by every scheme but HubSpot).
pub fn verify(scheme: Scheme, delivery: Delivery<'_>, config: &Config<'_>) -> Result<Verdict, Error> {
    if let Some(t) = config.tolerance_us {
        if t < 0 {
            return Err(Error::invalid("tolerance must not be negative"));
        }
        if t > MAX_TOLERANCE_US {
            return Err(Error::invalid("tolerance must be at most 365 days"));
        }
    }
    if delivery.url.is_some() && !scheme.signs_url() {
        return Err(Error::invalid(format!(
            "url applies only to schemes twilio, square and hubspot, not {}",
            scheme.name()
        )));
    }
    if config.hmac.is_some() && scheme != Scheme::Hmac {
        return Err(Error::invalid(format!(
            "signature_header, signature_prefix, algorithm and encoding apply only to scheme hmac, not {}",
            scheme.name()
        )));
    }
    let keys = keys(scheme, &config.secrets)?;
    let tolerance_us = config.tolerance_us.or(scheme.default_tolerance_s().map(|s| s * 1_000_000)).unwrap_or(0);
    scheme.verify_with(delivery, &keys, &Check { tolerance_us, now_us: config.now_us, hmac: config.hmac.as_ref() })
}

/// The symmetric replay-window check shared by timestamped schemes:
/// `|now - signed_at| <= tolerance` passes (inclusive bound). `signed_at` is
/// the signed Unix time in seconds; `now` and `tolerance` are microseconds,
/// compared without rounding, so that 300.5 s before and 300.5 s after are
/// rejected alike.
pub(crate) fn window(signed_at: i64, now: i64, tolerance: i64) -> Reason {
    window_ns(i128::from(signed_at) * 1_000_000_000, now, tolerance)
}

/// [`window`] for a signed time in Unix nanoseconds (HubSpot signs
/// milliseconds, Twitch RFC 3339 times with nanoseconds), compared exactly
/// with `now` and `tolerance` (microseconds).
pub(crate) fn window_ns(signed_at_ns: i128, now: i64, tolerance: i64) -> Reason {
    let age = i128::from(now) * 1_000 - signed_at_ns;
    let tolerance = i128::from(tolerance) * 1_000;
    if age > tolerance {
        Reason::TimestampTooOld
    } else if -age > tolerance {
        Reason::TimestampTooNew
    } else {
        Reason::Ok
    }
}

/// [`window`] for a signed time in microseconds (Linear signs milliseconds).
pub(crate) fn window_us(signed_at_us: i128, now: i64, tolerance: i64) -> Reason {
    window_ns(signed_at_us * 1_000, now, tolerance)
}

/// Parse a Unix timestamp in whole seconds: ASCII digits only, no sign, at
/// most 12 digits (year 33658). Milliseconds, junk or overflow give `None`.
pub fn parse_unix_seconds(text: &str) -> Option<i64> {
    if text.is_empty() || text.len() > 12 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The value of query parameter `name` in `url`, if present
/// (`application/x-www-form-urlencoded` decoding, as web frameworks decode
/// a query string).
pub(crate) fn query_parameter(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    let query = query.split('#').next().unwrap_or(query);
    form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

/// The single value of a header that must appear once, or the verdict for
/// its absence (missing) or repetition (malformed).
pub(crate) fn single<'h>(headers: &'h Headers, name: &str) -> Result<&'h str, Verdict> {
    match headers.one(name) {
        Ok(Some(value)) => Ok(value),
        Ok(None) => Err(Verdict::rejected(Reason::MissingHeader)),
        Err(_) => Err(Verdict::rejected(Reason::MalformedHeader)),
    }
}

/// The value of a scheme's signature header, present and sent once:
/// `missing_header` without it, `malformed_header` when it was sent more
/// than once (docs/signatures.md, "Repeated headers": every provider sends
/// its signature header once, and the SDKs that read it as one value fail
/// a repeated one). Several signatures go in that one value (Stripe's and
/// Standard Webhooks' lists). `signed_at` goes with the verdict where the
/// timestamp was read first.
pub(crate) fn signature_header<'h>(
    headers: &'h Headers,
    name: &str,
    signed_at: Option<i64>,
) -> Result<&'h str, Verdict> {
    match headers.one(name) {
        Ok(Some(value)) => Ok(value),
        Ok(None) => Err(Verdict { reason: Reason::MissingHeader, secret_index: None, signed_at }),
        Err(_) => Err(Verdict { reason: Reason::MalformedHeader, secret_index: None, signed_at }),
    }
}

/// A signed Unix timestamp header: present once and strictly numeric.
pub(crate) fn timestamp_header<'h>(headers: &'h Headers, name: &str) -> Result<(&'h str, i64), Verdict> {
    let text = single(headers, name)?.trim();
    let value = parse_unix_seconds(text).ok_or(Verdict::rejected(Reason::MalformedHeader))?;
    Ok((text, value))
}

/// The verdict of a scheme without a timestamp: which key's MAC (computed
/// by `mac`) matches one of `candidates`, if any.
pub(crate) fn untimed(keys: &[Vec<u8>], candidates: &[Vec<u8>], mac: impl Fn(&[u8]) -> Vec<u8>) -> Verdict {
    match ct::first_match(keys, candidates, mac) {
        Some(index) => Verdict { reason: Reason::Ok, secret_index: Some(index), signed_at: None },
        None => Verdict::rejected(Reason::NoMatchingSignature),
    }
}

/// The signatures in header values of the form `<tag><encoded MAC>` (GitHub
/// `sha256=`, Slack `v0=`), decoded by `decode`; also whether a value with
/// another `<tag>=` was seen (for `unsupported_version`).
pub(crate) fn tagged(
    values: &[impl AsRef<str>],
    tag: &str,
    decode: impl Fn(&str) -> Option<Vec<u8>>,
) -> (Vec<Vec<u8>>, bool) {
    tagged_by(values, tag, names_a_tag, decode)
}

/// A value without the scheme's tag names another version when it holds a
/// `<tag>=` (`sha1=...` where `sha256=` is expected).
pub(crate) fn names_a_tag(value: &str) -> bool {
    value.contains('=')
}

/// [`tagged`], with `other_tag` saying which values without `tag` name
/// another version (the generic scheme counts every such value).
fn tagged_by(
    values: &[impl AsRef<str>],
    tag: &str,
    other_tag: fn(&str) -> bool,
    decode: impl Fn(&str) -> Option<Vec<u8>>,
) -> (Vec<Vec<u8>>, bool) {
    let mut candidates = Vec::with_capacity(values.len());
    let mut other = false;
    for value in values {
        ct::check_interrupts();
        let value = value.as_ref().trim();
        match value.strip_prefix(tag) {
            Some(encoded) => candidates.extend(decode(encoded.trim())),
            None => other |= other_tag(value),
        }
    }
    (candidates, other)
}

/// The verdict when no candidate signature could be decoded: another
/// version tag was seen (`unsupported_version`) or nothing usable was.
pub(crate) fn no_candidates(other_tag: bool, signed_at: Option<i64>) -> Verdict {
    let reason = if other_tag { Reason::UnsupportedVersion } else { Reason::MalformedHeader };
    Verdict { reason, secret_index: None, signed_at }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheme_names_round_trip() {
        for s in Scheme::ALL {
            assert_eq!(Scheme::parse(s.name()), Ok(s));
            assert_eq!(Scheme::parse(&s.name().to_uppercase()), Ok(s));
        }
        assert_eq!(Scheme::parse("Svix"), Ok(Scheme::Standard));
        assert_eq!(Scheme::parse("clerk"), Ok(Scheme::Standard));
        assert_eq!(Scheme::parse("RESEND"), Ok(Scheme::Standard));
        let err = Scheme::parse("gitlab").unwrap_err();
        assert_eq!(err.to_string(), "unknown webhook signature scheme \"gitlab\"");
        let Error::InvalidParameter { hint: Some(hint), .. } = err else { panic!("{err:?}") };
        assert!(hint.contains("linear, hmac (svix, clerk and resend are aliases of standard)"), "{hint}");
    }

    #[test]
    fn documented_tolerances() {
        assert_eq!(Scheme::Stripe.default_tolerance_s(), Some(300));
        assert_eq!(Scheme::Slack.default_tolerance_s(), Some(300));
        assert_eq!(Scheme::Standard.default_tolerance_s(), Some(300));
        assert_eq!(Scheme::Paddle.default_tolerance_s(), Some(5));
        assert_eq!(Scheme::Zoom.default_tolerance_s(), Some(300), "none documented: Slack's");
        assert_eq!(Scheme::Hubspot.default_tolerance_s(), Some(300));
        assert_eq!(Scheme::Twitch.default_tolerance_s(), Some(600));
        assert_eq!(Scheme::Calendly.default_tolerance_s(), Some(180), "Calendly's example code");
        assert_eq!(Scheme::Github.default_tolerance_s(), None);
        assert_eq!(Scheme::Twitter.default_tolerance_s(), None);
        for untimed in [Scheme::Square, Scheme::Intercom, Scheme::Typeform] {
            assert_eq!(untimed.default_tolerance_s(), None, "{untimed:?}");
        }
        assert_eq!(Scheme::Discord.default_tolerance_s(), Some(300), "none documented");
        assert_eq!(Scheme::Sendgrid.default_tolerance_s(), Some(300), "none documented");
        assert_eq!(Scheme::Mailgun.default_tolerance_s(), Some(300), "no number documented");
        assert_eq!(Scheme::Linear.default_tolerance_s(), Some(60));
    }

    #[test]
    fn secrets_are_checked_without_echoing_them() {
        assert!(check_secrets(&[]).is_err());
        assert_eq!(check_secrets(&[Some("a"), Some("b")]).unwrap(), ["a", "b"]);
        let err = check_secrets(&[Some("ok"), Some("whsec_x\n")]).unwrap_err();
        assert_eq!(err.to_string(), "secret 2 of 2 has leading or trailing whitespace");
        assert!(!err.to_string().contains("whsec_x"));
        assert_eq!(check_secrets(&[Some("")]).unwrap_err().to_string(), "secret 1 of 1 is empty");
        assert!(matches!(check_secrets(&[None]), Err(Error::NullValue { .. })));
        assert!(check_secrets(&[Some(" lead")]).is_err());
    }

    #[test]
    fn standard_keys_must_decode() {
        assert_eq!(keys(Scheme::Standard, &["whsec_AAE="]).unwrap(), vec![Key::Mac(vec![0, 1])]);
        assert_eq!(keys(Scheme::Standard, &["AAE="]).unwrap(), vec![Key::Mac(vec![0, 1])]);
        let err = keys(Scheme::Standard, &["whsec_AAE=", "whsec_!!!!"]).unwrap_err().to_string();
        assert_eq!(err, "secret 2 of 2 is not canonical base64 after its optional whsec_ prefix");
        assert!(keys(Scheme::Standard, &["whsec_"]).is_err());
        assert_eq!(keys(Scheme::Stripe, &["whsec_AAE="]).unwrap(), vec![Key::Mac(b"whsec_AAE=".to_vec())]);
    }

    /// Public keys are configured like secrets and checked like them: a
    /// key that is none is a 22023 naming its position, never its value,
    /// and a public key cannot sign.
    #[test]
    fn public_keys_are_keys_of_their_kind() {
        let discord = "b5fc4af677fc5c8d60faebe7e1c9e18c383bc9edc1cb7a91bda54e2711b6b20f";
        assert!(matches!(keys(Scheme::Discord, &[discord]).unwrap()[0], Key::Ed25519(_)));
        let err = keys(Scheme::Discord, &[discord, "whsec_AAE="]).unwrap_err().to_string();
        assert_eq!(err, "secret 2 of 2 is not a Discord application public key (64 hex digits)");
        assert!(keys(Scheme::Sendgrid, &[discord]).is_err());
        let whpk = "whpk_ZlN4eg7dSSqi0moX9hQUk3orrOouK3QVQSlJa248c/g=";
        let err = secret_key(Scheme::Standard, whpk).unwrap_err().to_string();
        assert_eq!(
            err,
            "secret 1 of 1 is a public key of scheme standard, which verifies signatures but cannot make them"
        );
        assert_eq!(secret_key(Scheme::Standard, "whsec_AAE=").unwrap(), vec![0, 1]);
        assert_eq!(secret_key(Scheme::Mailgun, "key-1").unwrap(), b"key-1");
        // Any other scheme takes the same text as a shared secret.
        assert_eq!(keys(Scheme::Linear, &[discord]).unwrap(), vec![Key::Mac(discord.as_bytes().to_vec())]);
    }

    #[test]
    fn options_belong_to_their_scheme() {
        let headers = Headers::default();
        let config = Config { secrets: vec!["s"], tolerance_us: None, now_us: 0, hmac: None };
        let with_url = Delivery { body: b"", headers: &headers, url: Some("https://x/"), method: None };
        assert_eq!(
            verify(Scheme::Github, with_url, &config).unwrap_err().to_string(),
            "url applies only to schemes twilio, square and hubspot, not github"
        );
        let without = Delivery { body: b"", headers: &headers, url: None, method: None };
        for scheme in [Scheme::Twilio, Scheme::Square, Scheme::Hubspot] {
            assert!(scheme.signs_url());
            assert_eq!(
                verify(scheme, without, &config).unwrap_err().to_string(),
                format!("scheme {} needs the request url (argument url)", scheme.name())
            );
            let with_both = Delivery { method: Some("POST"), ..with_url };
            assert!(verify(scheme, with_both, &config).is_ok_and(|v| v.reason == Reason::MissingHeader));
        }
        assert!(verify(Scheme::Hmac, without, &config).is_err());
    }

    /// HubSpot signs the method: without one (or with an empty one) it is a
    /// misconfiguration, never a silent mismatch. Every other scheme
    /// ignores a method.
    #[test]
    fn method_is_required_by_hubspot_only() {
        let headers = Headers::default();
        let config = Config { secrets: vec!["s"], tolerance_us: None, now_us: 0, hmac: None };
        let url = Some("https://x/");
        for method in [None, Some("")] {
            let d = Delivery { body: b"", headers: &headers, url, method };
            let err = verify(Scheme::Hubspot, d, &config).unwrap_err();
            assert_eq!(err.to_string(), "scheme hubspot needs the request method (argument method)");
            assert!(matches!(err, Error::InvalidParameter { .. }), "22023");
        }
        let with = Delivery { body: b"", headers: &headers, url, method: Some("POST") };
        assert_eq!(verify(Scheme::Hubspot, with, &config).unwrap().reason, Reason::MissingHeader);
        let github = Delivery { body: b"", headers: &headers, url: None, method: Some("POST") };
        assert_eq!(verify(Scheme::Github, github, &config).unwrap().reason, Reason::MissingHeader);
    }

    #[test]
    fn window_is_symmetric_and_inclusive() {
        const S: i64 = 1_000_000;
        assert_eq!(window(1000, 1300 * S, 300 * S), Reason::Ok);
        assert_eq!(window(1000, 1301 * S, 300 * S), Reason::TimestampTooOld);
        assert_eq!(window(1300, 1000 * S, 300 * S), Reason::Ok);
        assert_eq!(window(1301, 1000 * S, 300 * S), Reason::TimestampTooNew);
        assert_eq!(window(0, i64::MAX, 300 * S), Reason::TimestampTooOld);
        assert_eq!(window(i64::MAX, i64::MIN, 300 * S), Reason::TimestampTooNew);
    }

    /// A signed time finer than a second (HubSpot's milliseconds, Twitch's
    /// nanoseconds) is compared exactly, on both sides.
    #[test]
    fn window_ns_is_exact() {
        const S: i64 = 1_000_000;
        const NS: i128 = 1_000_000_000;
        let t = 1_000 * NS + 500_000_000; // 1000.5 s
        assert_eq!(window_ns(t, 1_300 * S + S / 2, 300 * S), Reason::Ok, "exactly on the bound");
        assert_eq!(window_ns(t, 1_300 * S + S / 2 + 1, 300 * S), Reason::TimestampTooOld, "1 us past");
        assert_eq!(window_ns(t, 700 * S + S / 2, 300 * S), Reason::Ok);
        assert_eq!(window_ns(t, 700 * S + S / 2 - 1, 300 * S), Reason::TimestampTooNew);
        assert_eq!(window_ns(t + 1, 1_300 * S + S / 2, 300 * S), Reason::Ok, "a nanosecond later is younger");
        assert_eq!(window_ns(t - 1, 1_300 * S + S / 2, 300 * S), Reason::TimestampTooOld, "1 ns older");
        assert_eq!(window_ns(i128::from(i64::MAX) * NS, i64::MIN, 300 * S), Reason::TimestampTooNew);
        assert_eq!(unix_seconds_of_ns(-1), -1, "floor");
        assert_eq!(unix_seconds_of_ns(t), 1_000);
        assert_eq!(unix_seconds_of_ns(i128::MAX), i64::MAX);
    }

    /// The clock was floored to whole seconds, so a signature 300.5 s old
    /// passed a 300 s window while one 300.5 s ahead failed. Both sides
    /// now compare microseconds.
    #[test]
    fn window_compares_microseconds_on_both_sides() {
        const S: i64 = 1_000_000;
        for past in [S / 2, 9 * S / 10, 1] {
            assert_eq!(window(1000, (1300 * S) + past, 300 * S), Reason::TimestampTooOld, "{past} us past the window");
            assert_eq!(window(1300, (1000 * S) - past, 300 * S), Reason::TimestampTooNew, "{past} us before");
        }
        assert_eq!(window(1000, 1300 * S, 300 * S), Reason::Ok, "exactly on the bound passes");
        assert_eq!(window(1000, 1300 * S - 1, 300 * S), Reason::Ok);
        assert_eq!(window(1000, 1000 * S + S / 2, 0), Reason::TimestampTooOld, "a zero window is exact too");
    }

    #[test]
    fn unix_seconds_are_strict() {
        assert_eq!(parse_unix_seconds("1700000000"), Some(1_700_000_000));
        for bad in ["", "-5", "+5", "1.5", "1700000000000", " 1", "1e9", "abc"] {
            assert_eq!(parse_unix_seconds(bad), None, "{bad:?}");
        }
    }

    /// Debug output must never show a secret (the policy; StoredSecret
    /// already redacts), but Config and Key derive it.
    #[test]
    fn debug_output_never_shows_a_secret() {
        let config = Config { secrets: vec!["s3cret-value"], tolerance_us: None, now_us: 0, hmac: None };
        assert!(!format!("{config:?}").contains("s3cret-value"), "{config:?}");
        let key = keys(Scheme::Github, &["s3cret-value"]).unwrap().remove(0);
        let bytes = format!("{:?}", b"s3cret-value".to_vec());
        assert!(!format!("{key:?}").contains(&bytes), "{key:?}");
    }
}
