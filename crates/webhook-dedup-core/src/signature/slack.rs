//! Slack: `X-Slack-Signature: v0=<hex>` where the hex is HMAC-SHA256 of
//! `"v0:{X-Slack-Request-Timestamp}:{raw body}"` under the app's signing
//! secret (UTF-8).
//!
//! Source: Slack API docs, "Verifying requests from Slack",
//! <https://api.slack.com/authentication/verifying-requests-from-slack>:
//! reject a request whose timestamp is more than five minutes from local
//! time (so exactly 300 s passes); `v0` is the only version defined.

use super::{ct, no_candidates, tagged, timestamp_header, Delivery, Verdict};

/// The signature header, lower-cased.
pub const HEADER: &str = "x-slack-signature";
/// The signed timestamp header, lower-cased.
pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";
/// Slack's documented tolerance, seconds.
pub const DEFAULT_TOLERANCE_S: i64 = 300;
const TAG: &str = "v0=";

/// Verify a Slack request against every key.
pub fn verify(delivery: Delivery<'_>, keys: &[Vec<u8>], tolerance_us: i64, now_us: i64) -> Verdict {
    verify_v0(delivery, keys, HEADER, TIMESTAMP_HEADER, tolerance_us, now_us)
}

/// The `v0` construction, Slack's and Zoom's ([`super::zoom`]): the
/// `signature_header` holds `v0=<hex>` of HMAC-SHA256 over
/// `v0:{timestamp}:{body}`, the timestamp (Unix seconds, as sent) in
/// `timestamp_header`.
pub(super) fn verify_v0(
    delivery: Delivery<'_>,
    keys: &[Vec<u8>],
    signature_header: &str,
    timestamp_header_name: &str,
    tolerance_us: i64,
    now_us: i64,
) -> Verdict {
    let check = || -> Result<Verdict, Verdict> {
        let (ts_text, ts) = timestamp_header(delivery.headers, timestamp_header_name)?;
        let value = super::signature_header(delivery.headers, signature_header, Some(ts))?;
        let (candidates, other_tag) = tagged(&[value], TAG, |hex| ct::decode_hex(hex, 32));
        if candidates.is_empty() {
            return Err(no_candidates(other_tag, Some(ts)));
        }
        let matched = ct::first_match(keys, &candidates, |key| v0_mac(key, ts_text, delivery.body).to_vec());
        Ok(Verdict::timestamped(matched, ts, now_us, tolerance_us))
    };
    check().unwrap_or_else(|rejected| rejected)
}

/// HMAC-SHA256 of `v0:{timestamp}:{body}`.
pub(super) fn v0_mac(key: &[u8], timestamp: &str, body: &[u8]) -> [u8; 32] {
    ct::hmac_sha256(key, &[b"v0:", timestamp.as_bytes(), b":", body])
}

/// `v0=` and the lower-case hex of a MAC.
pub(super) fn v0_signature(mac: [u8; 32]) -> String {
    format!("{TAG}{}", hex::encode(mac))
}

/// The headers Slack would send for `body` under `secret` at `t`.
pub fn sign(body: &[u8], secret: &[u8], t: i64) -> Vec<(&'static str, String)> {
    let t = t.to_string();
    let signature = v0_signature(v0_mac(secret, &t, body));
    vec![("X-Slack-Request-Timestamp", t), ("X-Slack-Signature", signature)]
}

timed_mac_scheme!(Slack, "slack");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Headers;
    use crate::signature::Reason;

    fn check(body: &[u8], headers: &[(&str, &str)], now: i64) -> Verdict {
        let headers = Headers::from_pairs(headers.iter().copied());
        verify(
            Delivery { body, headers: &headers, url: None, method: None },
            &[b"secret".to_vec()],
            DEFAULT_TOLERANCE_S * 1_000_000,
            now * 1_000_000,
        )
    }

    #[test]
    fn sign_then_verify_and_reject() {
        let signed = sign(b"a=1", b"secret", 1_000);
        let pairs: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(check(b"a=1", &pairs, 1_000).reason, Reason::Ok);
        assert_eq!(check(b"a=1", &pairs, 1_301).reason, Reason::TimestampTooOld);
        assert_eq!(check(b"a=2", &pairs, 1_000).reason, Reason::NoMatchingSignature);
        assert_eq!(check(b"a=1", &pairs[1..], 1_000).reason, Reason::MissingHeader);
        assert_eq!(
            check(b"a=1", &[pairs[0], ("X-Slack-Signature", "v1=00")], 1_000).reason,
            Reason::UnsupportedVersion
        );
        assert_eq!(
            check(b"a=1", &[("X-Slack-Request-Timestamp", "soon"), pairs[1]], 1_000).reason,
            Reason::MalformedHeader
        );
    }
}
