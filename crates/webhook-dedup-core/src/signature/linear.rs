//! Linear: `Linear-Signature: <hex>` is HMAC-SHA256 of the raw body under
//! the webhook's signing secret (UTF-8). The time is inside the signed
//! body: `webhookTimestamp`, the Unix time in milliseconds at which Linear
//! sent the request, as a JSON integer. Hex decodes case-insensitively.
//!
//! Source: Linear developer docs, "Webhooks", section "Securing webhooks",
//! <https://linear.app/developers/webhooks#securing-webhooks>, and Linear's
//! SDK, `LinearWebhookClient.verify`,
//! <https://github.com/linear/linear/blob/master/packages/sdk/src/webhooks/client.ts>,
//! which rejects a `webhookTimestamp` more than one minute from the
//! receiver's clock, either way (`Math.abs(now - timestamp) > 60000`).
//!
//! Window: 60 s, symmetric and inclusive, compared in microseconds
//! (so 60.001 s is rejected). The signature is checked first; the body is
//! parsed only once it matched (a forged body costs one MAC, no JSON
//! parse), and a signed body without a numeric `webhookTimestamp` is
//! `malformed_header`: the signed time cannot be read. `signed_at` is the
//! whole second of the timestamp.

use super::scheme::{headers, mac_keys, Check, SchemeRules};
use super::{ct, single, untimed, window_us, Delivery, Reason, Verdict};
use super::{Key, SignRequest, Signed};
use crate::error::Error;
use serde_json::Value;

/// The signature header, lower-cased.
pub const HEADER: &str = "linear-signature";
/// The body member with the signed time (Unix milliseconds).
pub const TIMESTAMP_MEMBER: &str = "webhookTimestamp";
/// Linear's documented window, seconds.
pub const DEFAULT_TOLERANCE_S: i64 = 60;
/// The largest millisecond timestamp read: 15 digits, as
/// `unix_milliseconds` event times.
const MAX_TIMESTAMP_MS: u64 = 999_999_999_999_999;

/// Verify a Linear webhook against every key.
pub fn verify(delivery: Delivery<'_>, keys: &[Vec<u8>], tolerance_us: i64, now_us: i64) -> Verdict {
    let value = match single(delivery.headers, HEADER) {
        Ok(value) => value,
        Err(rejected) => return rejected,
    };
    let Some(candidate) = ct::decode_hex(value.trim(), 32) else {
        return Verdict::rejected(Reason::MalformedHeader);
    };
    let candidates = [candidate];
    let verdict = untimed(keys, &candidates, |key| ct::hmac_sha256(key, &[delivery.body]).to_vec());
    if !verdict.valid() {
        return verdict;
    }
    let Some(ms) = timestamp_ms(delivery.body) else {
        return Verdict::rejected(Reason::MalformedHeader);
    };
    let signed_at_us = i128::from(ms) * 1_000;
    Verdict {
        reason: window_us(signed_at_us, now_us, tolerance_us),
        secret_index: verdict.secret_index,
        signed_at: Some((ms / 1_000) as i64),
    }
}

/// The body's `webhookTimestamp`: a non-negative JSON integer of at most 15
/// digits, in a JSON object.
fn timestamp_ms(body: &[u8]) -> Option<u64> {
    let body: Value = serde_json::from_slice(body).ok()?;
    body.as_object()?.get(TIMESTAMP_MEMBER)?.as_u64().filter(|ms| *ms <= MAX_TIMESTAMP_MS)
}

/// The headers Linear would send for `body` under `secret` (the body
/// carries its own `webhookTimestamp`).
pub fn sign(body: &[u8], secret: &[u8]) -> Vec<(&'static str, String)> {
    vec![("Linear-Signature", hex::encode(ct::hmac_sha256(secret, &[body])))]
}

/// Scheme `linear`'s registration ([`super::scheme`]).
pub struct Linear;

impl SchemeRules for Linear {
    const NAME: &'static str = "linear";
    const DEFAULT_TOLERANCE_S: Option<i64> = Some(DEFAULT_TOLERANCE_S);

    fn verify(delivery: Delivery<'_>, keys: &[Key], check: &Check<'_>) -> Result<Verdict, Error> {
        Ok(verify(delivery, &mac_keys(keys), check.tolerance_us, check.now_us))
    }

    fn sign(body: &[u8], key: &[u8], _request: &SignRequest<'_>) -> Result<Signed, Error> {
        headers(sign(body, key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Headers;

    /// Our vector (Linear publishes none with its secret):
    /// ```sh
    /// printf '%s' '{"action":"create","type":"Issue","createdAt":"2023-11-14T22:13:19.000Z","data":{"id":"2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9","title":"Test"},"webhookTimestamp":1700000000000}' \
    ///   | openssl dgst -sha256 -hmac 'lin_wh_test_secret'
    /// ```
    pub(crate) const SECRET: &str = "lin_wh_test_secret";
    pub(crate) const BODY: &[u8] = br#"{"action":"create","type":"Issue","createdAt":"2023-11-14T22:13:19.000Z","data":{"id":"2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9","title":"Test"},"webhookTimestamp":1700000000000}"#;
    pub(crate) const SIGNATURE: &str = "cd66da886bac222a179d331b7766e8479b6aacb47b2d1a449f48e8e3237b59a0";
    const S: i64 = 1_000_000;
    const T: i64 = 1_700_000_000;

    fn check_us(body: &[u8], signatures: &[&str], now_us: i64) -> Verdict {
        let headers = Headers::from_pairs(signatures.iter().map(|s| ("Linear-Signature", *s)));
        verify(
            Delivery { body, headers: &headers, url: None, method: None },
            &[SECRET.as_bytes().to_vec()],
            60 * S,
            now_us,
        )
    }

    fn check(body: &[u8], signatures: &[&str], now: i64) -> Verdict {
        check_us(body, signatures, now * S)
    }

    #[test]
    fn our_vector_signs_and_verifies() {
        assert_eq!(sign(BODY, SECRET.as_bytes()), vec![("Linear-Signature", SIGNATURE.to_string())]);
        let v = check(BODY, &[SIGNATURE], T + 1);
        assert_eq!((v.reason, v.secret_index, v.signed_at), (Reason::Ok, Some(0), Some(T)));
        assert!(check(BODY, &[&SIGNATURE.to_uppercase()], T).valid(), "any case");
    }

    #[test]
    fn the_window_is_sixty_seconds_in_microseconds() {
        assert_eq!(check(BODY, &[SIGNATURE], T + 60).reason, Reason::Ok, "inclusive");
        assert_eq!(check(BODY, &[SIGNATURE], T - 60).reason, Reason::Ok);
        assert_eq!(check_us(BODY, &[SIGNATURE], (T + 60) * S + 1_000).reason, Reason::TimestampTooOld, "60.001 s");
        assert_eq!(check_us(BODY, &[SIGNATURE], (T - 60) * S - 1).reason, Reason::TimestampTooNew);
        let ms = br#"{"webhookTimestamp":1700000000999}"#;
        let signature = sign(ms, SECRET.as_bytes()).remove(0).1;
        let v = check_us(ms, &[&signature], (T + 60) * S + 999_000);
        assert_eq!((v.reason, v.signed_at), (Reason::Ok, Some(T)), "the milliseconds count; signed_at floors");
        assert_eq!(check_us(ms, &[&signature], (T + 60) * S + 999_001).reason, Reason::TimestampTooOld);
    }

    #[test]
    fn rejections_have_reasons() {
        assert_eq!(check(BODY, &[], T).reason, Reason::MissingHeader);
        assert_eq!(check(BODY, &[SIGNATURE, SIGNATURE], T).reason, Reason::MalformedHeader, "sent twice");
        assert_eq!(check(BODY, &["sha256=00"], T).reason, Reason::MalformedHeader);
        assert_eq!(check(BODY, &[&SIGNATURE[1..]], T).reason, Reason::MalformedHeader);
        let b64 = ct::encode_base64(&hex::decode(SIGNATURE).unwrap());
        assert_eq!(check(BODY, &[&b64], T).reason, Reason::MalformedHeader, "base64");
        let moved = String::from_utf8(BODY.to_vec()).unwrap().replace("1700000000000", "1700000060000");
        assert_eq!(check(moved.as_bytes(), &[SIGNATURE], T + 60).reason, Reason::NoMatchingSignature, "signed time");
        // Signed bodies whose time cannot be read.
        for body in [
            &br#"{"action":"create"}"#[..],
            br#"{"webhookTimestamp":"1700000000000"}"#,
            b"[1]",
            b"x",
            br#"{"webhookTimestamp":-1}"#,
            br#"{"webhookTimestamp":1700000000000.5}"#,
            br#"{"webhookTimestamp":10000000000000000}"#,
        ] {
            let signature = sign(body, SECRET.as_bytes()).remove(0).1;
            assert_eq!(
                check(body, &[&signature], T).reason,
                Reason::MalformedHeader,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
