//! Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...][,v0=<hex>]`
//! where each `v1` is HMAC-SHA256 of `"{t}.{raw body}"` under the endpoint
//! secret, the whole `whsec_...` string taken as UTF-8 bytes (it is not
//! base64-decoded, unlike Standard Webhooks).
//!
//! Source: Stripe Docs, "Verify webhook signatures manually",
//! <https://docs.stripe.com/webhooks#verify-manually>: several `v1` entries
//! appear while a secret is rolled; `v0` (test mode) and other schemes are
//! ignored; the libraries' default tolerance is 300 s. This verifier makes
//! the window symmetric (a timestamp more than the tolerance in the future
//! is rejected too), which Stripe's libraries do not.

use super::{Delivery, Encoding, Reason, TimestampedHeader, TimestampedList, Verdict};

/// The signature header, lower-cased.
pub const HEADER: &str = "stripe-signature";
/// Stripe's documented default tolerance, seconds.
pub const DEFAULT_TOLERANCE_S: i64 = 300;

/// Stripe's header: `,`-separated, timestamp `t`, signatures `v1` (hex),
/// each over `"{t}.{body}"`.
pub const FRAME: TimestampedHeader = TimestampedHeader {
    header: HEADER,
    sent_as: "Stripe-Signature",
    separator: ',',
    timestamp_key: "t",
    signature_key: "v1",
    joiner: ".",
    encoding: Encoding::Hex,
};

/// Parse the header (see [`TimestampedHeader`] for the rules).
pub fn parse(value: &str) -> Result<TimestampedList<'_>, Reason> {
    FRAME.parse(value)
}

/// Verify a Stripe delivery: some `v1` must match some key, and the signed
/// timestamp must be within `tolerance_us` of `now_us` (microseconds; Unix time).
pub fn verify(delivery: Delivery<'_>, keys: &[Vec<u8>], tolerance_us: i64, now_us: i64) -> Verdict {
    FRAME.verify(delivery, keys, tolerance_us, now_us)
}

/// The headers Stripe would send for `body` under `secret` at `t`.
pub fn sign(body: &[u8], secret: &[u8], t: i64) -> Vec<(&'static str, String)> {
    FRAME.sign(body, secret, t)
}

timed_mac_scheme!(Stripe, "stripe");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Headers;

    const SECRET: &[u8] = b"whsec_test_secret";
    const NOW: i64 = 1_700_000_000;

    fn check(body: &[u8], header: &str, now: i64) -> Verdict {
        let headers = Headers::from_pairs([("Stripe-Signature", header)]);
        verify(
            Delivery { body, headers: &headers, url: None, method: None },
            &[SECRET.to_vec()],
            DEFAULT_TOLERANCE_S * 1_000_000,
            now * 1_000_000,
        )
    }

    fn header(body: &[u8], t: i64) -> String {
        sign(body, SECRET, t).remove(0).1
    }

    #[test]
    fn sign_then_verify() {
        let v = check(b"{}", &header(b"{}", NOW), NOW + 10);
        assert_eq!((v.reason, v.secret_index, v.signed_at), (Reason::Ok, Some(0), Some(NOW)));
    }
}
