//! Discord interactions over HTTP: `X-Signature-Ed25519: <hex>` is an
//! Ed25519 signature (RFC 8032) of `"{X-Signature-Timestamp}{raw body}"`
//! (the timestamp text as sent, Unix seconds, then the body, no separator)
//! under the application's public key: the 64 hex digits shown as "Public
//! Key" on the application's General Information page. Hex decodes
//! case-insensitively; Ed25519 is verified strictly
//! ([`super::asymmetric`]).
//!
//! Source: Discord developer docs, "Overview of Interactions", section
//! "Validating Security Request Headers",
//! <https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers>,
//! and Discord's own SDK, discord-interactions-js `verifyKey`,
//! <https://github.com/discord/discord-interactions-js/blob/main/src/index.ts>.
//!
//! Replay window: Discord documents none, and `verifyKey` checks none (it
//! verifies the signature of timestamp and body, and never reads the
//! clock). Discord waits 3 seconds for the answer to an interaction and does
//! not retry it, so a genuine request is never minutes old; the default is
//! 300 s, the window Slack documents for the same signed-timestamp
//! construction (and Zoom's here), which absorbs clock skew and bounds the
//! replay of a captured request. `tolerance` overrides it.
//!
//! The PING that Discord sends when the endpoint URL is saved (and in its
//! routine checks) is signed like every interaction and answered by
//! [`crate::handshake`].

use super::asymmetric::{self, TimestampedSignature};
use super::{ct, Delivery, Key, Verdict};

/// The signature header, lower-cased.
pub const HEADER: &str = "x-signature-ed25519";
/// The signed timestamp header, lower-cased.
pub const TIMESTAMP_HEADER: &str = "x-signature-timestamp";
/// None documented: Slack's 300 s (see the module doc).
pub const DEFAULT_TOLERANCE_S: i64 = 300;

/// The key of a configured secret: the application's public key, 64 hex
/// digits (any case) of a valid Ed25519 key.
pub(crate) fn key(secret: &str) -> Result<Key, &'static str> {
    let bytes = ct::decode_hex(secret, asymmetric::ED25519_KEY_LEN)
        .ok_or("is not a Discord application public key (64 hex digits)")?;
    asymmetric::ed25519_key(&bytes).map(Key::Ed25519)
}

/// Verify a Discord interaction against every Ed25519 key.
pub fn verify(delivery: Delivery<'_>, keys: &[Key], tolerance_us: i64, now_us: i64) -> Verdict {
    FRAME.verify_delivery(delivery, keys, tolerance_us, now_us)
}

/// A hex Ed25519 signature of `"{timestamp}{body}"`, verified strictly.
const FRAME: TimestampedSignature<'static, Vec<u8>> = TimestampedSignature {
    header: HEADER,
    timestamp_header: TIMESTAMP_HEADER,
    decode: |hex| ct::decode_hex(hex, asymmetric::ED25519_SIGNATURE_LEN),
    verify: |key, signature, signed| match key {
        Key::Ed25519(key) => asymmetric::ed25519_verify(key, signature, signed),
        Key::Mac(_) | Key::P256(_) => false,
    },
};

public_key_scheme!(Discord, "discord");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::asymmetric::testing::{ed25519, ed25519_sign};
    use crate::signature::Reason;
    use crate::signature::{keys, Headers, Scheme};

    /// Our vector (Discord publishes none with its private key): the PING
    /// body of discord-interactions-js's tests, signed at 1700000000 with
    /// the Ed25519 seed `discord-interactions-test-seed!!` (32 ASCII bytes).
    /// Reproduce it with openssl:
    /// ```sh
    /// (printf '\x30\x2e\x02\x01\x00\x30\x05\x06\x03\x2b\x65\x70\x04\x22\x04\x20'; \
    ///  printf '%s' 'discord-interactions-test-seed!!') > sk.der
    /// openssl pkey -inform DER -in sk.der -pubout -outform DER | tail -c 32 | xxd -p -c 64   # the public key
    /// printf '%s' '1700000000{"id":"787053080478613555","token":"ThisIsATokenFromDiscordThatIsVeryLong","type":1,"version":1}' > m
    /// openssl pkeyutl -sign -inkey sk.der -keyform DER -rawin -in m | xxd -p -c 128           # X-Signature-Ed25519
    /// ```
    pub(crate) const SEED: &[u8; 32] = b"discord-interactions-test-seed!!";
    pub(crate) const PUBLIC_KEY: &str = "b5fc4af677fc5c8d60faebe7e1c9e18c383bc9edc1cb7a91bda54e2711b6b20f";
    pub(crate) const BODY: &[u8] =
        br#"{"id":"787053080478613555","token":"ThisIsATokenFromDiscordThatIsVeryLong","type":1,"version":1}"#;
    pub(crate) const SIGNATURE: &str = "713d2b178c084e5a21c883c18bb975e7613c3d0a44b4ef73875710d852311a327c6fab74e8d7093222c413d9be4ad4018f08e065cd324a211f917efe6d113a03";
    const T: i64 = 1_700_000_000;

    fn check(body: &[u8], timestamp: Option<&str>, signature: Option<&str>, secrets: &[&str], now: i64) -> Verdict {
        let mut pairs = Vec::new();
        pairs.extend(timestamp.map(|t| ("X-Signature-Timestamp", t)));
        pairs.extend(signature.map(|s| ("X-Signature-Ed25519", s)));
        let headers = Headers::from_pairs(pairs);
        let keys = keys(Scheme::Discord, secrets).unwrap();
        verify(
            Delivery { body, headers: &headers, url: None, method: None },
            &keys,
            DEFAULT_TOLERANCE_S * 1_000_000,
            now * 1_000_000,
        )
    }

    #[test]
    fn our_vector_matches_the_crate_and_verifies() {
        let signer = ed25519(*SEED);
        assert_eq!(hex::encode(signer.verifying_key().as_bytes()), PUBLIC_KEY);
        assert_eq!(hex::encode(ed25519_sign(&signer, &[b"1700000000", BODY])), SIGNATURE);
        let v = check(BODY, Some("1700000000"), Some(SIGNATURE), &[PUBLIC_KEY], T + 1);
        assert_eq!((v.reason, v.secret_index, v.signed_at), (Reason::Ok, Some(0), Some(T)));
        let upper = SIGNATURE.to_uppercase();
        assert!(check(BODY, Some("1700000000"), Some(&upper), &[&PUBLIC_KEY.to_uppercase()], T).valid(), "any case");
    }

    #[test]
    fn rejections_have_reasons() {
        let ts = Some("1700000000");
        let sig = Some(SIGNATURE);
        let other = hex::encode(ed25519([2; 32]).verifying_key().as_bytes());
        let v = check(BODY, ts, sig, &[&other, PUBLIC_KEY], T);
        assert_eq!((v.reason, v.secret_index), (Reason::Ok, Some(1)), "rotation: any key");
        assert_eq!(check(BODY, ts, sig, &[&other], T).reason, Reason::NoMatchingSignature);
        assert_eq!(check(b"{}", ts, sig, &[PUBLIC_KEY], T).reason, Reason::NoMatchingSignature);
        // The timestamp is signed.
        assert_eq!(check(BODY, Some("1700000001"), sig, &[PUBLIC_KEY], T).reason, Reason::NoMatchingSignature);
        assert_eq!(check(BODY, ts, sig, &[PUBLIC_KEY], T + 301).reason, Reason::TimestampTooOld);
        assert_eq!(check(BODY, ts, sig, &[PUBLIC_KEY], T - 301).reason, Reason::TimestampTooNew);
        assert_eq!(check(BODY, ts, sig, &[PUBLIC_KEY], T + 300).reason, Reason::Ok, "inclusive");
        assert_eq!(check(BODY, None, sig, &[PUBLIC_KEY], T).reason, Reason::MissingHeader);
        assert_eq!(check(BODY, ts, None, &[PUBLIC_KEY], T).reason, Reason::MissingHeader);
        assert_eq!(check(BODY, Some("17e8"), sig, &[PUBLIC_KEY], T).reason, Reason::MalformedHeader);
        assert_eq!(check(BODY, ts, Some(&SIGNATURE[2..]), &[PUBLIC_KEY], T).reason, Reason::MalformedHeader);
        let b64 = ct::encode_base64(&hex::decode(SIGNATURE).unwrap());
        assert_eq!(check(BODY, ts, Some(&b64), &[PUBLIC_KEY], T).reason, Reason::MalformedHeader, "base64");
    }

    #[test]
    fn keys_are_hex_ed25519_public_keys() {
        let err = |secret: &str| keys(Scheme::Discord, &[PUBLIC_KEY, secret]).unwrap_err().to_string();
        assert_eq!(err("abc"), "secret 2 of 2 is not a Discord application public key (64 hex digits)");
        assert!(err(&"0".repeat(64)).contains("weak"), "the all-zero y is a small-order point");
        let base64_key = ct::encode_base64(&hex::decode(PUBLIC_KEY).unwrap());
        assert!(!err(&base64_key).contains(&base64_key), "never echoed");
        assert!(matches!(keys(Scheme::Discord, &[PUBLIC_KEY]).unwrap()[0], Key::Ed25519(_)));
    }
}
