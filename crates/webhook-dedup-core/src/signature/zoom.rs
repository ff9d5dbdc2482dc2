//! Zoom: `x-zm-signature: v0=<hex>` where the hex is HMAC-SHA256 of
//! `"v0:{x-zm-request-timestamp}:{raw body}"` under the app's webhook
//! secret token (UTF-8); `x-zm-request-timestamp` is Unix seconds.
//!
//! Source: Zoom Developer docs, "Using webhooks", sections "Verify webhook
//! events" and "Validate your webhook endpoint",
//! <https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events>
//! and <https://developers.zoom.us/docs/api/webhooks/#validate-your-webhook-endpoint>;
//! the 72-hour revalidation: <https://developers.zoom.us/changelog/platform/webhook-url-validation/>.
//! `v0` is the only version defined.
//!
//! Replay window: Zoom documents none (its docs, its webhook sample and its
//! Rivet SDK compare the signature only), so the default is 300 s, Slack's
//! documented window for the same `v0:{timestamp}:{body}` construction,
//! symmetric and inclusive like every window here.
//!
//! Endpoint URL validation: Zoom POSTs
//! `{"payload":{"plainToken":"..."},"event_ts":...,"event":"endpoint.url_validation"}`
//! (signed like any event) when the endpoint is saved and every 72 hours;
//! the receiver answers 200 within 3 s with the JSON object
//! `{"plainToken":"<the same>","encryptedToken":"<lower-case hex HMAC-SHA256 of plainToken>"}`
//! under the same secret token ([`encrypted_token`]). Because that answer is
//! the same MAC, in the same encoding, as an event signature, answering an
//! arbitrary `plainToken` would be a signing oracle: asked for the token
//! `v0:{t}:{forged body}`, it returns a valid `x-zm-signature` for the
//! forged body. Every signed message contains `:`, so [`encrypted_token`]
//! refuses a `plainToken` that contains one (Zoom's are base64url-like,
//! e.g. `qgg8vlvZRS6UYooatFL8Aw`); verifying the validation request's own
//! signature first, as Zoom's sample does, is still the better practice.

use super::{ct, slack, Delivery, Verdict};

/// The signature header, lower-cased.
pub const HEADER: &str = "x-zm-signature";
/// The signed timestamp header, lower-cased.
pub const TIMESTAMP_HEADER: &str = "x-zm-request-timestamp";
/// No documented Zoom window: Slack's 300 s for the same construction.
pub const DEFAULT_TOLERANCE_S: i64 = 300;
/// The `event` of Zoom's endpoint URL validation request.
pub const URL_VALIDATION_EVENT: &str = "endpoint.url_validation";

/// Verify a Zoom delivery against every key: Slack's `v0` construction
/// under Zoom's header names.
pub fn verify(delivery: Delivery<'_>, keys: &[Vec<u8>], tolerance_us: i64, now_us: i64) -> Verdict {
    slack::verify_v0(delivery, keys, HEADER, TIMESTAMP_HEADER, tolerance_us, now_us)
}

/// The headers Zoom would send for `body` under `secret` at `t`.
pub fn sign(body: &[u8], secret: &[u8], t: i64) -> Vec<(&'static str, String)> {
    let t = t.to_string();
    let signature = slack::v0_signature(slack::v0_mac(secret, &t, body));
    vec![("x-zm-request-timestamp", t), ("x-zm-signature", signature)]
}

/// The `encryptedToken` of Zoom's endpoint URL validation: lower-case hex
/// HMAC-SHA256 of `plain_token` under `key` (the secret token's bytes).
/// `Err` for an empty token or one containing `:` (it could be the signed
/// message of an event, see the module doc); the message never echoes the
/// key or the token.
pub fn encrypted_token(key: &[u8], plain_token: &str) -> Result<String, &'static str> {
    if plain_token.is_empty() {
        return Err("the plainToken is empty");
    }
    if plain_token.contains(':') {
        return Err("a plainToken containing ':' could be a signed event message and is not answered");
    }
    Ok(hex::encode(ct::hmac_sha256(key, &[plain_token.as_bytes()])))
}

timed_mac_scheme!(Zoom, "zoom");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::{Headers, Reason};

    const SECRET: &[u8] = b"secretValueTest";
    const NOW: i64 = 1_700_000_000;
    const BODY: &[u8] = br#"{"event":"meeting.started","payload":{"object":{"id":"85746065432"}}}"#;
    /// Our own vector, reproducible with
    /// `printf '%s' 'v0:1700000000:{"event":"meeting.started","payload":{"object":{"id":"85746065432"}}}'
    ///  | openssl dgst -sha256 -hmac 'secretValueTest' -hex`.
    const SIG: &str = "v0=4937fb9e8e35fb00b5c1d1ffbf3518b24c548278fc007a4548fc9a7053124a60";

    fn check(body: &[u8], headers: &[(&str, &str)], keys: &[&[u8]], now: i64) -> Verdict {
        let headers = Headers::from_pairs(headers.iter().copied());
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        verify(
            Delivery { body, headers: &headers, url: None, method: None },
            &keys,
            DEFAULT_TOLERANCE_S * 1_000_000,
            now * 1_000_000,
        )
    }

    fn signed(sig: &str) -> [(&str, &str); 2] {
        [("X-Zm-Request-Timestamp", "1700000000"), ("X-Zm-Signature", sig)]
    }

    #[test]
    fn own_vector_signs_and_verifies() {
        let headers = sign(BODY, SECRET, NOW);
        assert_eq!(headers[0], ("x-zm-request-timestamp", "1700000000".to_string()));
        assert_eq!(headers[1], ("x-zm-signature", SIG.to_string()));
        let v = check(BODY, &signed(SIG), &[b"old", SECRET], NOW + 10);
        assert_eq!((v.reason, v.secret_index, v.signed_at), (Reason::Ok, Some(1), Some(NOW)));
        // hex is case-insensitive
        assert!(check(BODY, &signed(&SIG.to_uppercase().replacen("V0=", "v0=", 1)), &[SECRET], NOW).valid());
    }

    #[test]
    fn window_is_symmetric_and_inclusive() {
        let h = signed(SIG);
        assert_eq!(check(BODY, &h, &[SECRET], NOW + 300).reason, Reason::Ok);
        assert_eq!(check(BODY, &h, &[SECRET], NOW - 300).reason, Reason::Ok);
        assert_eq!(check(BODY, &h, &[SECRET], NOW + 301).reason, Reason::TimestampTooOld);
        assert_eq!(check(BODY, &h, &[SECRET], NOW - 301).reason, Reason::TimestampTooNew);
    }

    #[test]
    fn rejections_have_reasons() {
        let h = signed(SIG);
        assert_eq!(check(b"{}", &h, &[SECRET], NOW).reason, Reason::NoMatchingSignature);
        assert_eq!(check(BODY, &h, &[b"wrong"], NOW).reason, Reason::NoMatchingSignature);
        assert_eq!(check(BODY, &h[1..], &[SECRET], NOW).reason, Reason::MissingHeader);
        assert_eq!(check(BODY, &h[..1], &[SECRET], NOW).reason, Reason::MissingHeader);
        assert_eq!(check(BODY, &signed("v1=00"), &[SECRET], NOW).reason, Reason::UnsupportedVersion);
        assert_eq!(check(BODY, &signed("v0=zz"), &[SECRET], NOW).reason, Reason::MalformedHeader);
        assert_eq!(check(BODY, &signed(&SIG[..40]), &[SECRET], NOW).reason, Reason::MalformedHeader);
        let ms = [("x-zm-request-timestamp", "1700000000000"), ("x-zm-signature", SIG)];
        assert_eq!(check(BODY, &ms, &[SECRET], NOW).reason, Reason::MalformedHeader, "milliseconds");
        // the timestamp is signed: moving it breaks the signature
        let moved = [("x-zm-request-timestamp", "1700000001"), ("x-zm-signature", SIG)];
        assert_eq!(check(BODY, &moved, &[SECRET], NOW).reason, Reason::NoMatchingSignature);
        let twice =
            [("x-zm-request-timestamp", "1700000000"), ("X-ZM-Request-Timestamp", "1"), ("x-zm-signature", SIG)];
        assert_eq!(check(BODY, &twice, &[SECRET], NOW).reason, Reason::MalformedHeader);
    }

    /// Zoom's docs publish the example plainToken `qgg8vlvZRS6UYooatFL8Aw`
    /// (with an encryptedToken whose secret they do not give). Under our
    /// secret the answer, reproducible with
    /// `printf '%s' qgg8vlvZRS6UYooatFL8Aw | openssl dgst -sha256 -hmac secretValueTest -hex`,
    /// is also the one Elastic Beats' http_endpoint tests expect for Zoom.
    #[test]
    fn url_validation_answer() {
        assert_eq!(
            encrypted_token(SECRET, "qgg8vlvZRS6UYooatFL8Aw").unwrap(),
            "70c1f2e2e6ca2d39297490d1f9142c7d701415ea8e6151f6562a08fa657a40ff"
        );
    }

    #[test]
    fn url_validation_is_no_signing_oracle() {
        let forged = format!("v0:{NOW}:{}", std::str::from_utf8(BODY).unwrap());
        let err = encrypted_token(SECRET, &forged).unwrap_err();
        assert!(!err.contains("secretValueTest") && !err.contains("v0:"), "{err}");
        assert!(encrypted_token(SECRET, "").is_err());
        assert!(encrypted_token(SECRET, "a:b").is_err());
        // what it would have answered is exactly the event signature
        assert_eq!(format!("v0={}", hex::encode(ct::hmac_sha256(SECRET, &[forged.as_bytes()]))), SIG);
    }
}
