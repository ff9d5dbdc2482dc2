//! Webhook signature verification, one file per provider scheme, over the
//! raw body bytes exactly as received. Pure Rust: no Postgres in here.
//!
//! The policy every scheme follows (`docs/sql-reference.md`, webhook_verify;
//! it is the policy the shared test vectors in `tests/vectors/` encode):
//! - any configured secret matching any presented signature passes
//!   (secret rotation on either side);
//! - only the scheme's own version tag counts; other tags are skipped and
//!   never compared as an HMAC;
//! - hex decodes case-insensitively; comparisons are constant-time over
//!   decoded bytes of equal length ([`ct::equal`]);
//! - timestamp windows are symmetric with an inclusive bound:
//!   `|now - t| > tolerance` rejects;
//! - a secret that is empty or carries leading/trailing whitespace is a
//!   configuration error (22023), never a silent mismatch.

pub mod ct;
pub mod github;
pub mod headers;
pub mod stripe;
#[cfg(any(test, feature = "pg_test"))]
pub mod vectors;

use crate::error::Error;
pub use headers::Headers;

/// A provider's signing scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// GitHub: `X-Hub-Signature-256`, see [`github`].
    Github,
    /// Stripe: `Stripe-Signature`, see [`stripe`].
    Stripe,
}

impl Scheme {
    pub const ALL: [Scheme; 2] = [Scheme::Github, Scheme::Stripe];

    pub fn name(self) -> &'static str {
        match self {
            Scheme::Github => "github",
            Scheme::Stripe => "stripe",
        }
    }

    /// Parse a scheme name (case-insensitive). Unknown names are 22023.
    pub fn parse(name: &str) -> Result<Self, Error> {
        Scheme::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                Error::invalid_with_hint(
                    format!("unknown webhook signature scheme \"{name}\""),
                    format!(
                        "Supported schemes: {}.",
                        Scheme::ALL.map(Scheme::name).join(", ")
                    ),
                )
            })
    }

    /// The replay window the provider documents, in seconds, for schemes
    /// that sign a timestamp.
    pub fn default_tolerance_s(self) -> Option<i64> {
        match self {
            Scheme::Github => None,
            Scheme::Stripe => Some(stripe::DEFAULT_TOLERANCE_S),
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
    /// Well-formed signatures, none of which matches any secret.
    NoMatchingSignature,
    /// The signed timestamp is older than the tolerance.
    TimestampTooOld,
    /// The signed timestamp is further in the future than the tolerance.
    TimestampTooNew,
}

impl Reason {
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
    /// The signed timestamp (Unix seconds), for schemes that have one.
    pub signed_at: Option<i64>,
}

impl Verdict {
    pub fn valid(&self) -> bool {
        self.reason == Reason::Ok
    }

    pub(crate) fn rejected(reason: Reason) -> Self {
        Verdict {
            reason,
            secret_index: None,
            signed_at: None,
        }
    }
}

/// One delivery to verify.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    /// The raw body bytes exactly as received.
    pub body: &'a [u8],
    pub headers: &'a Headers,
}

/// The verifier's configuration for one call.
#[derive(Debug, Clone)]
pub struct Config<'a> {
    /// Every currently valid secret, already checked by [`check_secrets`].
    pub secrets: Vec<&'a str>,
    /// Replay window in seconds; `None` means the scheme's default.
    pub tolerance_s: Option<i64>,
    /// The verifier's clock, Unix seconds.
    pub now_unix: i64,
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
        .map(|(i, secret)| {
            let n = i + 1;
            match secret {
                None => Err(Error::NullValue {
                    what: "every element of secrets",
                }),
                Some("") => Err(Error::invalid(format!(
                    "secret {n} of {} is empty",
                    secrets.len()
                ))),
                Some(s) if s.trim() != *s => Err(Error::invalid_with_hint(
                    format!(
                        "secret {n} of {} has leading or trailing whitespace",
                        secrets.len()
                    ),
                    "Secrets are used byte for byte; a trailing newline copied from a file is \
                     the usual cause.",
                )),
                Some(s) => Ok(*s),
            }
        })
        .collect()
}

/// Verify one delivery under `scheme`.
pub fn verify(
    scheme: Scheme,
    delivery: Delivery<'_>,
    config: &Config<'_>,
) -> Result<Verdict, Error> {
    if let Some(t) = config.tolerance_s {
        if t < 0 {
            return Err(Error::invalid("tolerance must not be negative"));
        }
    }
    Ok(match scheme {
        Scheme::Github => github::verify(delivery, &config.secrets),
        Scheme::Stripe => stripe::verify(
            delivery,
            &config.secrets,
            config.tolerance_s.unwrap_or(stripe::DEFAULT_TOLERANCE_S),
            config.now_unix,
        ),
    })
}

/// The symmetric replay-window check shared by timestamped schemes:
/// `|now - signed_at| <= tolerance` passes (inclusive bound).
pub(crate) fn window(signed_at: i64, now: i64, tolerance: i64) -> Reason {
    let age = i128::from(now) - i128::from(signed_at);
    if age > i128::from(tolerance) {
        Reason::TimestampTooOld
    } else if -age > i128::from(tolerance) {
        Reason::TimestampTooNew
    } else {
        Reason::Ok
    }
}

/// Parse a Unix timestamp in whole seconds: ASCII digits only, no sign, at
/// most 12 digits (year 33658). Milliseconds, junk or overflow give `None`.
pub(crate) fn parse_unix_seconds(text: &str) -> Option<i64> {
    if text.is_empty() || text.len() > 12 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
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
        let err = Scheme::parse("gitlab").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown webhook signature scheme \"gitlab\""
        );
    }

    #[test]
    fn secrets_are_checked_without_echoing_them() {
        assert!(check_secrets(&[]).is_err());
        assert_eq!(check_secrets(&[Some("a"), Some("b")]).unwrap(), ["a", "b"]);
        let err = check_secrets(&[Some("ok"), Some("whsec_x\n")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "secret 2 of 2 has leading or trailing whitespace"
        );
        assert!(!err.to_string().contains("whsec_x"));
        assert_eq!(
            check_secrets(&[Some("")]).unwrap_err().to_string(),
            "secret 1 of 1 is empty"
        );
        assert!(matches!(
            check_secrets(&[None]),
            Err(Error::NullValue { .. })
        ));
        assert!(check_secrets(&[Some(" lead")]).is_err());
    }

    #[test]
    fn window_is_symmetric_and_inclusive() {
        assert_eq!(window(1000, 1300, 300), Reason::Ok);
        assert_eq!(window(1000, 1301, 300), Reason::TimestampTooOld);
        assert_eq!(window(1300, 1000, 300), Reason::Ok);
        assert_eq!(window(1301, 1000, 300), Reason::TimestampTooNew);
        assert_eq!(window(0, i64::MAX, 300), Reason::TimestampTooOld);
        assert_eq!(window(i64::MAX, i64::MIN, 300), Reason::TimestampTooNew);
    }

    #[test]
    fn unix_seconds_are_strict() {
        assert_eq!(parse_unix_seconds("1700000000"), Some(1_700_000_000));
        for bad in ["", "-5", "+5", "1.5", "1700000000000", " 1", "1e9", "abc"] {
            assert_eq!(parse_unix_seconds(bad), None, "{bad:?}");
        }
    }
}
