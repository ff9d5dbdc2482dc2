//! Calendly (API v2): `Calendly-Webhook-Signature: t=<unix>,v1=<hex>` where
//! the `v1` hex is HMAC-SHA256 of `"{t}.{raw body}"` under the webhook
//! signing key (UTF-8: the key given when creating the subscription, or the
//! one Calendly generates for an OAuth application).
//!
//! Source: Calendly Developer docs, "Webhook signatures",
//! <https://developer.calendly.com/api-docs/overview/webhooks/webhook-signatures>,
//! and "Webhooks", <https://developer.calendly.com/docs/webhooks/overview>
//! (`Calendly-Webhook-Signature: t=<unix>,v1=<hex>. Verify
//! HMAC-SHA256(key, "<t>." + raw_body)`). The header is parsed like
//! Stripe's ([`TimestampedHeader`]): elements other than `t` and `v1`
//! are skipped, a missing, duplicated or malformed `t` rejects the header.
//!
//! Replay window: the docs' prose names none; the example code on the
//! "Webhook signatures" page rejects a timestamp more than three minutes old
//! (`const threeMinutes = 180000; const tolerance = threeMinutes;`), so the
//! default is 180 s, symmetric and inclusive like every window here.

use super::{Delivery, Encoding, Reason, TimestampedHeader, TimestampedList, Verdict};

/// The signature header, lower-cased.
pub const HEADER: &str = "calendly-webhook-signature";
/// The tolerance of Calendly's example code (three minutes), seconds.
pub const DEFAULT_TOLERANCE_S: i64 = 180;

/// Calendly's header, Stripe's shape: `,`-separated, timestamp `t`,
/// signatures `v1` (hex), each over `"{t}.{body}"`.
pub const FRAME: TimestampedHeader = TimestampedHeader {
    header: HEADER,
    sent_as: "Calendly-Webhook-Signature",
    separator: ',',
    timestamp_key: "t",
    signature_key: "v1",
    joiner: ".",
    encoding: Encoding::Hex,
};

/// Parse the header: `,`-separated, timestamp `t`, signatures `v1`.
pub fn parse(value: &str) -> Result<TimestampedList<'_>, Reason> {
    FRAME.parse(value)
}

/// Verify a Calendly delivery against every key, within `tolerance_us` of
/// `now_us` (microseconds; Unix time).
pub fn verify(delivery: Delivery<'_>, keys: &[Vec<u8>], tolerance_us: i64, now_us: i64) -> Verdict {
    FRAME.verify(delivery, keys, tolerance_us, now_us)
}

/// The headers Calendly would send for `body` under `secret` at `t`.
pub fn sign(body: &[u8], secret: &[u8], t: i64) -> Vec<(&'static str, String)> {
    FRAME.sign(body, secret, t)
}

timed_mac_scheme!(Calendly, "calendly");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Headers;

    /// Our vector (Calendly publishes none):
    /// `printf '%s' '1700000000.{"event":"invitee.created",...}' | openssl dgst -sha256 -hmac calendly-signing-key`.
    const SECRET: &[u8] = b"calendly-signing-key";
    const BODY: &[u8] = br#"{"event":"invitee.created","created_at":"2023-11-14T22:13:20.000000Z","payload":{"uri":"https://api.calendly.com/scheduled_events/GBGBDCAADAEDCRZ2/invitees/AAAAAAAAAAAAAAAA"}}"#;
    const HEADER_VALUE: &str = "t=1700000000,v1=f60a689b5e8a8dadc86c1f9851458594816c3cfc29d49c847da1331a14d4b23a";
    const NOW: i64 = 1_700_000_000;

    fn check(body: &[u8], value: &str, keys: &[&[u8]], now: i64) -> Verdict {
        let headers = Headers::from_pairs([("Calendly-Webhook-Signature", value)]);
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        let d = Delivery { body, headers: &headers, url: None, method: None };
        verify(d, &keys, DEFAULT_TOLERANCE_S * 1_000_000, now * 1_000_000)
    }

    #[test]
    fn own_vector_signs_and_verifies() {
        assert_eq!(sign(BODY, SECRET, NOW), vec![("Calendly-Webhook-Signature", HEADER_VALUE.to_string())]);
        let v = check(BODY, HEADER_VALUE, &[b"old", SECRET], NOW + 10);
        assert_eq!((v.reason, v.secret_index, v.signed_at), (Reason::Ok, Some(1), Some(NOW)));
    }
}
