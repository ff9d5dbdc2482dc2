//! Paddle Billing: `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>...]`
//! where each `h1` is HMAC-SHA256 of `"{ts}:{raw body}"` under the
//! notification destination's secret key (UTF-8).
//!
//! Source: Paddle Developer docs, "Verify webhook signatures",
//! <https://developer.paddle.com/webhooks/signature-verification>: several
//! `h1` values appear while a secret is rotated; the SDKs' helpers enforce a
//! five-second tolerance by default. (Paddle Classic's RSA
//! `p_signature` is a different, retired scheme and is not supported.)

use super::{Delivery, Encoding, Reason, TimestampedHeader, TimestampedList, Verdict};

/// The signature header, lower-cased.
pub const HEADER: &str = "paddle-signature";
/// The SDKs' default tolerance, seconds.
pub const DEFAULT_TOLERANCE_S: i64 = 5;

/// Paddle's header: `;`-separated, timestamp `ts`, signatures `h1` (hex),
/// each over `"{ts}:{body}"`.
pub const FRAME: TimestampedHeader = TimestampedHeader {
    header: HEADER,
    sent_as: "Paddle-Signature",
    separator: ';',
    timestamp_key: "ts",
    signature_key: "h1",
    joiner: ":",
    encoding: Encoding::Hex,
};

/// Parse the header (see [`TimestampedHeader`] for the rules).
pub fn parse(value: &str) -> Result<TimestampedList<'_>, Reason> {
    FRAME.parse(value)
}

/// Verify a Paddle delivery against every key.
pub fn verify(delivery: Delivery<'_>, keys: &[Vec<u8>], tolerance_us: i64, now_us: i64) -> Verdict {
    FRAME.verify(delivery, keys, tolerance_us, now_us)
}

/// The headers Paddle would send for `body` under `secret` at `t`.
pub fn sign(body: &[u8], secret: &[u8], t: i64) -> Vec<(&'static str, String)> {
    FRAME.sign(body, secret, t)
}

timed_mac_scheme!(Paddle, "paddle");

// Tested by the timestamped header's table of cases (`frame.rs`, over every
// scheme of the frame) and by our vector (`vectors.rs`).
