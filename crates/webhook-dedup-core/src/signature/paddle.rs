//! Paddle Billing: `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>...]`
//! where each `h1` is HMAC-SHA256 of `"{ts}:{raw body}"` under the
//! notification destination's secret key (UTF-8).
//!
//! Source: Paddle Developer docs, "Verify webhook signatures",
//! <https://developer.paddle.com/webhooks/signature-verification>: several
//! `h1` values appear while a secret is rotated; the SDKs' helpers enforce a
//! five-second tolerance by default. (Paddle Classic's RSA
//! `p_signature` is a different, retired scheme and is not supported.)

use super::{ct, no_candidates, parse_timestamped_list, single, Delivery, Reason, TimestampedList, Verdict};

/// The signature header, lower-cased.
pub const HEADER: &str = "paddle-signature";
/// The SDKs' default tolerance, seconds.
pub const DEFAULT_TOLERANCE_S: i64 = 5;

/// Parse the header: `;`-separated, timestamp `ts`, signatures `h1`
/// (see [`parse_timestamped_list`] for the rules).
pub fn parse(value: &str) -> Result<TimestampedList<'_>, Reason> {
    parse_timestamped_list(value, ';', "ts", "h1")
}

/// Verify a Paddle delivery against every key.
pub fn verify(delivery: Delivery<'_>, keys: &[Vec<u8>], tolerance_us: i64, now_us: i64) -> Verdict {
    check(delivery, keys, tolerance_us, now_us).unwrap_or_else(|rejected| rejected)
}

fn check(delivery: Delivery<'_>, keys: &[Vec<u8>], tolerance_us: i64, now_us: i64) -> Result<Verdict, Verdict> {
    let list = parse(single(delivery.headers, HEADER)?).map_err(Verdict::rejected)?;
    if list.signatures.is_empty() {
        return Err(no_candidates(list.other_tags, Some(list.timestamp)));
    }
    let matched = ct::first_match(keys, &list.signatures, |key| {
        ct::hmac_sha256(key, &[list.timestamp_text.as_bytes(), b":", delivery.body]).to_vec()
    });
    Ok(Verdict::timestamped(matched, list.timestamp, now_us, tolerance_us))
}

/// The headers Paddle would send for `body` under `secret` at `t`.
pub fn sign(body: &[u8], secret: &[u8], t: i64) -> Vec<(&'static str, String)> {
    let t = t.to_string();
    let mac = ct::hmac_sha256(secret, &[t.as_bytes(), b":", body]);
    vec![("Paddle-Signature", format!("ts={t};h1={}", hex::encode(mac)))]
}

timed_mac_scheme!(Paddle, "paddle");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Headers;

    fn check(body: &[u8], value: &str, now: i64) -> Reason {
        let headers = Headers::from_pairs([("Paddle-Signature", value)]);
        verify(
            Delivery { body, headers: &headers, url: None, method: None },
            &[b"pdl_secret".to_vec()],
            DEFAULT_TOLERANCE_S * 1_000_000,
            now * 1_000_000,
        )
        .reason
    }

    #[test]
    fn sign_then_verify_and_reject() {
        let header = sign(b"{}", b"pdl_secret", 1_000).remove(0).1;
        assert_eq!(check(b"{}", &header, 1_005), Reason::Ok);
        assert_eq!(check(b"{}", &header, 1_006), Reason::TimestampTooOld);
        assert_eq!(check(b"{ }", &header, 1_000), Reason::NoMatchingSignature);
        let rotated = format!("ts=1000;h1={};{}", "0".repeat(64), header.split(';').nth(1).unwrap());
        assert_eq!(check(b"{}", &rotated, 1_000), Reason::Ok);
        assert_eq!(check(b"{}", &format!("{header};ts=1000"), 1_000), Reason::MalformedHeader);
        assert_eq!(check(b"{}", "ts=1000;h2=00", 1_000), Reason::UnsupportedVersion);
    }
}
