//! Paddle Billing: `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>...]`
//! where each `h1` is HMAC-SHA256 of `"{ts}:{raw body}"` under the
//! notification destination's secret key (UTF-8).
//!
//! Source: Paddle Developer docs, "Verify webhook signatures",
//! <https://developer.paddle.com/webhooks/signature-verification>: several
//! `h1` values appear while a secret is rotated; the SDKs' helpers enforce a
//! five-second tolerance by default. (Paddle Classic's RSA
//! `p_signature` is a different, retired scheme and is not supported.)

use super::{ct, no_candidates, parse_unix_seconds, single, Delivery, Reason, Verdict};

/// The signature header, lower-cased.
pub const HEADER: &str = "paddle-signature";
/// The SDKs' default tolerance, seconds.
pub const DEFAULT_TOLERANCE_S: i64 = 5;

/// A parsed `Paddle-Signature` header: the timestamp as sent and as a
/// number, the decoded `h1` values, and whether other tags were present.
type Parsed<'a> = (&'a str, i64, Vec<Vec<u8>>, bool);

/// Parse the header: elements separated by `;` with optional whitespace;
/// a malformed element is skipped; a missing, duplicated or malformed `ts`
/// rejects the header.
pub fn parse(value: &str) -> Result<Parsed<'_>, Reason> {
    let mut ts: Option<(&str, i64)> = None;
    let mut h1 = Vec::new();
    let mut other = false;
    for element in value.split(';') {
        let Some((key, val)) = element.trim().split_once('=') else {
            continue;
        };
        let val = val.trim();
        match key.trim() {
            "ts" => {
                if ts.is_some() {
                    return Err(Reason::MalformedHeader);
                }
                ts = Some((val, parse_unix_seconds(val).ok_or(Reason::MalformedHeader)?));
            }
            "h1" => h1.extend(ct::decode_hex(val, 32)),
            _ => other = true,
        }
    }
    let (text, ts) = ts.ok_or(Reason::MalformedHeader)?;
    Ok((text, ts, h1, other))
}

/// Verify a Paddle delivery against every key.
pub fn verify(
    delivery: Delivery<'_>,
    keys: &[Vec<u8>],
    tolerance_s: i64,
    now_unix: i64,
) -> Verdict {
    let value = match single(delivery.headers, HEADER) {
        Ok(value) => value,
        Err(verdict) => return verdict,
    };
    let (ts_text, ts, h1, other) = match parse(value) {
        Ok(parsed) => parsed,
        Err(reason) => return Verdict::rejected(reason),
    };
    if h1.is_empty() {
        return no_candidates(other, Some(ts));
    }
    let matched = ct::first_match(keys, &h1, |key| {
        ct::hmac_sha256(key, &[ts_text.as_bytes(), b":", delivery.body]).to_vec()
    });
    Verdict::timestamped(matched, ts, now_unix, tolerance_s)
}

/// The headers Paddle would send for `body` under `secret` at `t`.
pub fn sign(body: &[u8], secret: &[u8], t: i64) -> Vec<(&'static str, String)> {
    let t = t.to_string();
    let mac = ct::hmac_sha256(secret, &[t.as_bytes(), b":", body]);
    vec![(
        "Paddle-Signature",
        format!("ts={t};h1={}", hex::encode(mac)),
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Headers;

    fn check(body: &[u8], value: &str, now: i64) -> Reason {
        let headers = Headers::from_pairs([("Paddle-Signature", value)]);
        verify(
            Delivery {
                body,
                headers: &headers,
                url: None,
            },
            &[b"pdl_secret".to_vec()],
            DEFAULT_TOLERANCE_S,
            now,
        )
        .reason
    }

    #[test]
    fn sign_then_verify_and_reject() {
        let header = sign(b"{}", b"pdl_secret", 1_000).remove(0).1;
        assert_eq!(check(b"{}", &header, 1_005), Reason::Ok);
        assert_eq!(check(b"{}", &header, 1_006), Reason::TimestampTooOld);
        assert_eq!(check(b"{ }", &header, 1_000), Reason::NoMatchingSignature);
        let rotated = format!(
            "ts=1000;h1={};{}",
            "0".repeat(64),
            header.split(';').nth(1).unwrap()
        );
        assert_eq!(check(b"{}", &rotated, 1_000), Reason::Ok);
        assert_eq!(
            check(b"{}", &format!("{header};ts=1000"), 1_000),
            Reason::MalformedHeader
        );
        assert_eq!(
            check(b"{}", "ts=1000;h2=00", 1_000),
            Reason::UnsupportedVersion
        );
    }
}
