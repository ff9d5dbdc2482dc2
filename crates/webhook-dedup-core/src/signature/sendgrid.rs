//! SendGrid (Twilio SendGrid) signed Event Webhook:
//! `X-Twilio-Email-Event-Webhook-Signature: <base64>` is the DER of an ECDSA
//! P-256 signature with SHA-256 (FIPS 186-5) of
//! `"{X-Twilio-Email-Event-Webhook-Timestamp}{raw body}"` (the timestamp
//! text as sent, Unix seconds, then the body, no separator), verified with
//! the webhook's verification key: the base64 of the DER of its
//! SubjectPublicKeyInfo (RFC 5480), as the SendGrid console shows it (no
//! PEM lines). The signature is canonical padded base64 of strict DER; any
//! `s` in `1..n` is accepted ([`super::asymmetric`] says why).
//!
//! Source: Twilio SendGrid docs, "Getting Started with the Event Webhook
//! Security Features",
//! <https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features>,
//! and SendGrid's libraries (`EventWebhook.verify_signature` in
//! sendgrid-python, sendgrid-nodejs), whose test vectors are the ones
//! tested here.
//!
//! Replay window: SendGrid documents none and its libraries check none.
//! The default is 300 s, the window of Standard Webhooks and Slack (the
//! same choice Symfony's SendGrid webhook parser made); `tolerance`
//! overrides it. SendGrid retries a failed POST for up to 24 hours: this
//! assumes, as for every timestamped scheme here, that a retry is signed
//! anew with the time of its own attempt.

use super::asymmetric::{self, TimestampedSignature};
use super::{ct, Delivery, Key, Verdict};

/// The signature header, lower-cased.
pub const HEADER: &str = "x-twilio-email-event-webhook-signature";
/// The signed timestamp header, lower-cased.
pub const TIMESTAMP_HEADER: &str = "x-twilio-email-event-webhook-timestamp";
/// None documented: 300 s (see the module doc).
pub const DEFAULT_TOLERANCE_S: i64 = 300;

/// The key of a configured secret: the verification key, canonical base64
/// of the DER of a P-256 SubjectPublicKeyInfo.
pub(crate) fn key(secret: &str) -> Result<Key, &'static str> {
    let der = ct::decode_base64(secret, None)
        .ok_or("is not canonical base64 (the SendGrid verification key, without PEM lines)")?;
    asymmetric::p256_key(&der).map(Key::P256)
}

/// Verify a SendGrid Event Webhook POST against every P-256 key.
pub fn verify(delivery: Delivery<'_>, keys: &[Key], tolerance_us: i64, now_us: i64) -> Verdict {
    FRAME.verify_delivery(delivery, keys, tolerance_us, now_us)
}

/// A base64 strict-DER ECDSA P-256 signature of `"{timestamp}{body}"`.
const FRAME: TimestampedSignature<'static, asymmetric::P256Signature> = TimestampedSignature {
    header: HEADER,
    timestamp_header: TIMESTAMP_HEADER,
    decode: |b64| ct::decode_base64(b64, None).and_then(|der| asymmetric::p256_signature(&der)),
    verify: |key, signature, signed| match key {
        Key::P256(key) => asymmetric::p256_verify(key, signature, signed),
        Key::Mac(_) | Key::Ed25519(_) => false,
    },
};

public_key_scheme!(Sendgrid, "sendgrid");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::asymmetric::testing::{p256, p256_public_base64, p256_sign};
    use crate::signature::Reason;
    use crate::signature::{keys, Headers, Scheme};

    /// SendGrid's published vector, sendgrid-python `test/unit/test_eventwebhook.py`
    /// (<https://github.com/sendgrid/sendgrid-python/blob/main/test/unit/test_eventwebhook.py>):
    /// a real event, its body `json.dumps(..., sort_keys=True,
    /// separators=(',', ':'))` followed by CRLF. Check it with openssl:
    /// ```sh
    /// printf '%s' "$PUBLIC_KEY" | base64 -d > key.der
    /// printf '%s' "$SIGNATURE" | base64 -d > sig.der
    /// printf '1600112502%s\r\n' "$BODY" | openssl dgst -sha256 -verify key.der -keyform DER -signature sig.der
    /// # Verified OK
    /// ```
    pub(crate) const PUBLIC_KEY: &str = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g==";
    pub(crate) const SIGNATURE: &str =
        "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM=";
    pub(crate) const TIMESTAMP: &str = "1600112502";
    pub(crate) const BODY: &[u8] = b"[{\"email\":\"hello@world.com\",\"event\":\"dropped\",\"reason\":\"Bounced Address\",\"sg_event_id\":\"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA\",\"sg_message_id\":\"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0\",\"smtp-id\":\"<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>\",\"timestamp\":1600112492}]\r\n";
    const T: i64 = 1_600_112_502;

    /// sendgrid-nodejs's vector (`packages/eventwebhook/src/eventwebhook.spec.js`):
    /// another key, a signature with a low `s`.
    const NODE_PUBLIC_KEY: &str = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA==";
    const NODE_SIGNATURE: &str =
        "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0=";
    const NODE_BODY: &[u8] = br#"{"category":"example_payload","event":"test_event","message_id":"message_id"}"#;

    fn check(body: &[u8], timestamp: &str, signature: Option<&str>, secrets: &[&str], now: i64) -> Verdict {
        let mut pairs = vec![("X-Twilio-Email-Event-Webhook-Timestamp", timestamp)];
        pairs.extend(signature.map(|s| ("X-Twilio-Email-Event-Webhook-Signature", s)));
        let headers = Headers::from_pairs(pairs);
        let keys = keys(Scheme::Sendgrid, secrets).unwrap();
        verify(
            Delivery { body, headers: &headers, url: None, method: None },
            &keys,
            DEFAULT_TOLERANCE_S * 1_000_000,
            now * 1_000_000,
        )
    }

    #[test]
    fn the_published_vectors_verify() {
        let v = check(BODY, TIMESTAMP, Some(SIGNATURE), &[PUBLIC_KEY], T + 10);
        assert_eq!((v.reason, v.secret_index, v.signed_at), (Reason::Ok, Some(0), Some(T)));
        let node = check(NODE_BODY, "1588788367", Some(NODE_SIGNATURE), &[PUBLIC_KEY, NODE_PUBLIC_KEY], 1_588_788_367);
        assert_eq!((node.reason, node.secret_index), (Reason::Ok, Some(1)));
        // sendgrid-python's negative cases: another key, another payload,
        // the node signature, a timestamp that is no number.
        assert_eq!(check(BODY, TIMESTAMP, Some(SIGNATURE), &[NODE_PUBLIC_KEY], T).reason, Reason::NoMatchingSignature);
        assert_eq!(check(b"payload", TIMESTAMP, Some(SIGNATURE), &[PUBLIC_KEY], T).reason, Reason::NoMatchingSignature);
        assert_eq!(check(BODY, TIMESTAMP, Some(NODE_SIGNATURE), &[PUBLIC_KEY], T).reason, Reason::NoMatchingSignature);
        assert_eq!(check(BODY, "timestamp", Some(SIGNATURE), &[PUBLIC_KEY], T).reason, Reason::MalformedHeader);
        // The CRLF is part of the signed body.
        let trimmed = &BODY[..BODY.len() - 2];
        assert_eq!(check(trimmed, TIMESTAMP, Some(SIGNATURE), &[PUBLIC_KEY], T).reason, Reason::NoMatchingSignature);
    }

    /// The published signature's `s` is above n/2: SendGrid does not
    /// normalise, so high `s` must pass.
    #[test]
    fn the_published_signature_has_a_high_s() {
        let der = ct::decode_base64(SIGNATURE, None).unwrap();
        let signature = asymmetric::p256_signature(&der).unwrap();
        assert!(signature.normalize_s().is_some(), "high s");
    }

    #[test]
    fn window_and_encoding_rules() {
        let ok = |now| check(BODY, TIMESTAMP, Some(SIGNATURE), &[PUBLIC_KEY], now).reason;
        assert_eq!(ok(T + 300), Reason::Ok);
        assert_eq!(ok(T + 301), Reason::TimestampTooOld);
        assert_eq!(ok(T - 301), Reason::TimestampTooNew);
        let timestamp_moved = check(BODY, "1600112503", Some(SIGNATURE), &[PUBLIC_KEY], T).reason;
        assert_eq!(timestamp_moved, Reason::NoMatchingSignature, "the timestamp is signed");
        assert_eq!(check(BODY, TIMESTAMP, None, &[PUBLIC_KEY], T).reason, Reason::MissingHeader);
        let unpadded = SIGNATURE.trim_end_matches('=');
        assert_eq!(check(BODY, TIMESTAMP, Some(unpadded), &[PUBLIC_KEY], T).reason, Reason::MalformedHeader);
        let hex = hex::encode(ct::decode_base64(SIGNATURE, None).unwrap());
        assert_eq!(check(BODY, TIMESTAMP, Some(&hex), &[PUBLIC_KEY], T).reason, Reason::MalformedHeader);
        // Our own signer (RFC 6979) round-trips.
        let signer = p256(b"sendgrid-test");
        let public = p256_public_base64(&signer);
        let own = ct::encode_base64(&p256_sign(&signer, &[TIMESTAMP.as_bytes(), BODY]));
        assert!(check(BODY, TIMESTAMP, Some(&own), &[&public], T).valid());
        assert_eq!(check(BODY, TIMESTAMP, Some(&own), &[PUBLIC_KEY], T).reason, Reason::NoMatchingSignature);
    }

    #[test]
    fn keys_are_base64_spki_p256_keys() {
        let err = |secret: &str| keys(Scheme::Sendgrid, &[PUBLIC_KEY, secret]).unwrap_err().to_string();
        let pem = format!("-----BEGIN PUBLIC KEY-----\n{PUBLIC_KEY}\n-----END PUBLIC KEY-----");
        assert!(err(&pem).starts_with("secret 2 of 2 is not canonical base64"));
        assert!(err("AAAA").starts_with("secret 2 of 2 is not a P-256 public key"));
        let ed25519 = ct::encode_base64(&hex::decode(format!("302a300506032b6570032100{}", "11".repeat(32))).unwrap());
        let message = err(&ed25519);
        assert!(message.contains("P-256") && !message.contains(&ed25519), "{message}");
        assert!(matches!(keys(Scheme::Sendgrid, &[PUBLIC_KEY]).unwrap()[0], Key::P256(_)));
    }
}
