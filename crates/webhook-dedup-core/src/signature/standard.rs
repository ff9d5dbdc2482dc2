//! Standard Webhooks (and Svix, its origin): `webhook-id`,
//! `webhook-timestamp` and `webhook-signature: v1,<base64> [v1,<base64> ...]`
//! where each `v1` signature is base64 of HMAC-SHA256 of
//! `"{webhook-id}.{webhook-timestamp}.{raw body}"`, keyed with the base64
//! decoding of the secret after its optional `whsec_` prefix.
//!
//! Source: the Standard Webhooks specification,
//! <https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md>
//! (signature list space-delimited, versions `v1` symmetric and `v1a`
//! asymmetric; five-minute tolerance in the reference libraries), and Svix,
//! "Verifying webhooks manually",
//! <https://docs.svix.com/receiving/verifying-payloads/how-manual>
//! (`svix-id`, `svix-timestamp`, `svix-signature` are the same headers under
//! another prefix).
//!
//! `v1a`, the specification's asymmetric version: an Ed25519 signature
//! (RFC 8032) of the same `"{webhook-id}.{webhook-timestamp}.{raw body}"`,
//! `v1a,<base64 of the 64-byte signature>` in the same list, verified with
//! the sender's public key `whpk_<base64 of the 32-byte key>` (the private
//! key, `whsk_<base64 of the 32-byte seed>`, stays with the sender). The
//! reference libraries' Go implementation,
//! <https://github.com/standard-webhooks/standard-webhooks/blob/main/libraries/go/webhook_asymmetric.go>,
//! is the same construction. Each configured key checks only signatures of
//! its own kind: a `whsec_` secret the `v1` entries, a `whpk_` key the `v1a`
//! entries; a tag no configured key can check is skipped (never compared as
//! an HMAC) and, when nothing else is there, `unsupported_version`. Ed25519
//! is verified strictly ([`super::asymmetric`]).

use super::scheme::{headers, needs_msg_id, Check, SchemeRules};
use super::{asymmetric, ct, no_candidates, single, timestamp_header, Delivery, Key, Verdict};
use super::{SignRequest, Signed};
use crate::error::Error;
use crate::signature::Headers;

/// The `webhook-*` header names (the specification's).
pub const HEADERS: [&str; 3] = ["webhook-id", "webhook-timestamp", "webhook-signature"];
/// The `svix-*` header names, used when no `webhook-*` header is present.
pub const SVIX_HEADERS: [&str; 3] = ["svix-id", "svix-timestamp", "svix-signature"];
/// The reference libraries' tolerance, seconds.
pub const DEFAULT_TOLERANCE_S: i64 = 300;
const SECRET_PREFIX: &str = "whsec_";
/// The prefix of an Ed25519 public key (`v1a`).
pub const PUBLIC_KEY_PREFIX: &str = "whpk_";
/// The prefix of an Ed25519 private key, which only a sender holds.
const PRIVATE_KEY_PREFIX: &str = "whsk_";

/// The key of a secret: a `whpk_` public key (strict base64 of a 32-byte
/// Ed25519 key), else an HMAC key (strict base64 after an optional
/// `whsec_`); a secret that does not decode, or decodes to nothing, is a
/// configuration error, and so is a `whsk_` private key.
pub(crate) fn key(secret: &str) -> Result<Key, &'static str> {
    if let Some(encoded) = secret.strip_prefix(PUBLIC_KEY_PREFIX) {
        let bytes = ct::decode_base64(encoded, None).ok_or("is not canonical base64 after its whpk_ prefix")?;
        return asymmetric::ed25519_key(&bytes).map(Key::Ed25519);
    }
    if secret.starts_with(PRIVATE_KEY_PREFIX) {
        return Err("is a whsk_ private key: configure the sender's whpk_ public key instead");
    }
    let encoded = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
    match ct::decode_base64(encoded, None) {
        Some(key) if !key.is_empty() => Ok(Key::Mac(key)),
        Some(_) => Err("decodes to an empty key"),
        None => Err("is not canonical base64 after its optional whsec_ prefix"),
    }
}

/// Which header names this delivery uses: `webhook-*`, else `svix-*`.
fn names(headers: &Headers) -> [&'static str; 3] {
    if HEADERS.iter().any(|h| !headers.all(h).is_empty()) {
        HEADERS
    } else {
        SVIX_HEADERS
    }
}

/// Verify a Standard Webhooks delivery against every key: `whsec_` keys
/// against the `v1` signatures, `whpk_` keys against the `v1a` ones.
pub fn verify(delivery: Delivery<'_>, keys: &[Key], tolerance_us: i64, now_us: i64) -> Verdict {
    check(delivery, keys, tolerance_us, now_us).unwrap_or_else(|rejected| rejected)
}

fn check(delivery: Delivery<'_>, keys: &[Key], tolerance_us: i64, now_us: i64) -> Result<Verdict, Verdict> {
    let [id_name, ts_name, sig_name] = names(delivery.headers);
    let id = single(delivery.headers, id_name)?.trim();
    let (ts_text, ts) = timestamp_header(delivery.headers, ts_name)?;
    let value = super::signature_header(delivery.headers, sig_name, Some(ts))?;
    let has_mac = keys.iter().any(|k| matches!(k, Key::Mac(_)));
    let has_public = keys.iter().any(|k| matches!(k, Key::Ed25519(_)));
    let (mut macs, mut signatures) = (Vec::new(), Vec::new());
    let mut other_version = false;
    for entry in value.split_ascii_whitespace() {
        ct::check_interrupts();
        match entry.split_once(',') {
            Some(("v1", sig)) if has_mac => macs.extend(ct::decode_base64(sig, Some(32))),
            Some(("v1a", sig)) if has_public => {
                signatures.extend(ct::decode_base64(sig, Some(asymmetric::ED25519_SIGNATURE_LEN)))
            }
            Some(_) => other_version = true,
            None => {}
        }
    }
    if macs.is_empty() && signatures.is_empty() {
        return Err(no_candidates(other_version, Some(ts)));
    }
    let signed: [&[u8]; 5] = [id.as_bytes(), b".", ts_text.as_bytes(), b".", delivery.body];
    let matched = keys.iter().position(|key| match key {
        Key::Mac(key) => ct::first_match(&[key], &macs, |key| ct::hmac_sha256(key, &signed).to_vec()).is_some(),
        Key::Ed25519(key) => signatures.iter().any(|sig| asymmetric::ed25519_verify(key, sig, &signed)),
        Key::P256(_) => false,
    });
    Ok(Verdict::timestamped(matched, ts, now_us, tolerance_us))
}

/// The headers a Standard Webhooks sender would send for `body`, message
/// `id` and time `t`, with `key` already decoded from its secret.
pub fn sign(body: &[u8], key: &[u8], id: &str, t: i64) -> Vec<(&'static str, String)> {
    let t = t.to_string();
    let mac = ct::hmac_sha256(key, &[id.as_bytes(), b".", t.as_bytes(), b".", body]);
    vec![
        ("webhook-id", id.to_string()),
        ("webhook-timestamp", t),
        ("webhook-signature", format!("v1,{}", ct::encode_base64(&mac))),
    ]
}

/// Scheme `standard`'s registration ([`super::scheme`]).
pub struct Standard;

impl SchemeRules for Standard {
    const NAME: &'static str = "standard";
    const DEFAULT_TOLERANCE_S: Option<i64> = Some(DEFAULT_TOLERANCE_S);
    const SIGNED_ID_HEADERS: &'static [&'static str] = &["webhook-id", "svix-id"];

    fn key(secret: &str) -> Result<Key, &'static str> {
        key(secret)
    }

    fn verify(delivery: Delivery<'_>, keys: &[Key], check: &Check<'_>) -> Result<Verdict, Error> {
        Ok(verify(delivery, keys, check.tolerance_us, check.now_us))
    }

    fn sign(body: &[u8], key: &[u8], request: &SignRequest<'_>) -> Result<Signed, Error> {
        headers(sign(body, key, needs_msg_id(request)?, request.unix_s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Reason;

    fn check(body: &[u8], pairs: &[(&str, &str)], now: i64) -> Verdict {
        check_with(body, pairs, now, &[Key::Mac(vec![7; 24])])
    }

    fn check_with(body: &[u8], pairs: &[(&str, &str)], now: i64, keys: &[Key]) -> Verdict {
        let headers = Headers::from_pairs(pairs.iter().copied());
        verify(
            Delivery { body, headers: &headers, url: None, method: None },
            keys,
            DEFAULT_TOLERANCE_S * 1_000_000,
            now * 1_000_000,
        )
    }

    #[test]
    fn sign_then_verify_with_either_header_prefix() {
        let signed = sign(b"{}", &[7; 24], "msg_1", 1_000);
        let pairs: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(check(b"{}", &pairs, 1_000).reason, Reason::Ok);
        let svix: Vec<(String, &str)> = pairs.iter().map(|(k, v)| (k.replace("webhook-", "svix-"), *v)).collect();
        let svix: Vec<(&str, &str)> = svix.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(check(b"{}", &svix, 1_000).reason, Reason::Ok);
        assert_eq!(check(b"{}", &pairs, 1_301).reason, Reason::TimestampTooOld);
        // the id is signed
        let other_id = [("webhook-id", "msg_2"), pairs[1], pairs[2]];
        assert_eq!(check(b"{}", &other_id, 1_000).reason, Reason::NoMatchingSignature);
        assert_eq!(check(b"{}", &pairs[1..], 1_000).reason, Reason::MissingHeader);
    }

    #[test]
    fn only_v1_counts() {
        let signed = sign(b"{}", &[7; 24], "msg_1", 1_000);
        let sig = signed[2].1.trim_start_matches("v1,").to_string();
        let v1a = format!("v1a,{sig}");
        let pairs = [("webhook-id", "msg_1"), ("webhook-timestamp", "1000"), ("webhook-signature", v1a.as_str())];
        assert_eq!(check(b"{}", &pairs, 1_000).reason, Reason::UnsupportedVersion);
        let both = format!("v1a,xyz v1,{sig}");
        let pairs = [("webhook-id", "msg_1"), ("webhook-timestamp", "1000"), ("webhook-signature", both.as_str())];
        assert_eq!(check(b"{}", &pairs, 1_000).reason, Reason::Ok);
    }
}

#[cfg(test)]
mod v1a_tests {
    use super::*;
    use crate::signature::asymmetric::testing::{ed25519, ed25519_sign};
    use crate::signature::Reason;
    use crate::signature::{keys, verify as verify_scheme, Config, Scheme};

    /// The reference libraries' published v1a vector: Go's
    /// `TestAsymmetricWebhookSign`,
    /// <https://github.com/standard-webhooks/standard-webhooks/blob/main/libraries/go/webhook_asymmetric_test.go>
    /// (the private key is the seed `TESTSIGNINGKEYDONOTUSETHISFORANY`).
    /// Reproduce it with openssl (a PKCS#8 wrapper of the seed, then a raw
    /// Ed25519 signature):
    /// ```sh
    /// (printf '\x30\x2e\x02\x01\x00\x30\x05\x06\x03\x2b\x65\x70\x04\x22\x04\x20'; \
    ///  printf '%s' VEVTVFNJR05JTkdLRVlET05PVFVTRVRISVNGT1JBTlk= | base64 -d) > sk.der
    /// openssl pkey -inform DER -in sk.der -pubout -outform DER | tail -c 32 | base64   # the whpk_ key
    /// printf '%s' 'msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"test": 2432232314}' > m
    /// openssl pkeyutl -sign -inkey sk.der -keyform DER -rawin -in m | base64 -w0     # the v1a signature
    /// ```
    const SEED_B64: &str = "VEVTVFNJR05JTkdLRVlET05PVFVTRVRISVNGT1JBTlk=";
    const PUBLIC_KEY: &str = "whpk_ZlN4eg7dSSqi0moX9hQUk3orrOouK3QVQSlJa248c/g=";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIGNATURE: &str =
        "v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBRdM5WqyeFiL8Ag==";

    fn pairs(signature: &str) -> [(&'static str, String); 3] {
        [("webhook-id", ID.into()), ("webhook-timestamp", "1614265330".into()), ("webhook-signature", signature.into())]
    }

    fn run(signature: &str, secrets: &[&str], now: i64) -> Verdict {
        let pairs = pairs(signature);
        let headers = Headers::from_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())));
        let config = Config { secrets: secrets.to_vec(), tolerance_us: None, now_us: now * 1_000_000, hmac: None };
        verify_scheme(Scheme::Standard, Delivery { body: BODY, headers: &headers, url: None, method: None }, &config)
            .unwrap()
    }

    #[test]
    fn the_reference_vector_verifies() {
        let seed: [u8; 32] = ct::decode_base64(SEED_B64, Some(32)).unwrap().try_into().unwrap();
        let signer = ed25519(seed);
        let public = format!("whpk_{}", ct::encode_base64(signer.verifying_key().as_bytes()));
        assert_eq!(public, PUBLIC_KEY);
        let ours = ed25519_sign(&signer, &[ID.as_bytes(), b".1614265330.", BODY]);
        assert_eq!(format!("v1a,{}", ct::encode_base64(&ours)), SIGNATURE);
        let v = run(SIGNATURE, &[PUBLIC_KEY], 1_614_265_330);
        assert_eq!((v.reason, v.secret_index, v.signed_at), (Reason::Ok, Some(0), Some(1_614_265_330)));
        assert_eq!(run(SIGNATURE, &[PUBLIC_KEY], 1_614_265_631).reason, Reason::TimestampTooOld);
    }

    /// Each key checks only its own kind: a whsec_ secret never looks at a
    /// v1a entry, a whpk_ key never at a v1 entry, and with both kinds
    /// configured the matching key's position is reported.
    #[test]
    fn keys_check_signatures_of_their_own_kind() {
        let t = 1_614_265_330;
        let hmac = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        assert_eq!(run(SIGNATURE, &[hmac], t).reason, Reason::UnsupportedVersion);
        let v1 = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        assert_eq!(run(v1, &[hmac], t).reason, Reason::Ok, "the specification's v1 vector");
        assert_eq!(run(v1, &[PUBLIC_KEY], t).reason, Reason::UnsupportedVersion);
        let both = format!("{v1} {SIGNATURE}");
        assert_eq!(run(&both, &[hmac, PUBLIC_KEY], t).secret_index, Some(0));
        assert_eq!(run(&both, &[PUBLIC_KEY, hmac], t).secret_index, Some(0));
        assert_eq!(run(SIGNATURE, &[hmac, PUBLIC_KEY], t).secret_index, Some(1));
        // The v1a signature's first 32 bytes, labelled v1, are no HMAC.
        let sig = ct::decode_base64(&SIGNATURE[4..], None).unwrap();
        let forged = format!("v1,{}", ct::encode_base64(&sig[..32]));
        assert_eq!(run(&forged, &[PUBLIC_KEY], t).reason, Reason::UnsupportedVersion);
        // Another key, a changed body byte: no match.
        let other = format!("whpk_{}", ct::encode_base64(ed25519([1; 32]).verifying_key().as_bytes()));
        assert_eq!(run(SIGNATURE, &[&other], t).reason, Reason::NoMatchingSignature);
        // Malformed v1a entries are skipped: wrong length, unpadded, base64url.
        let short = format!("v1a,{}", ct::encode_base64(&sig[..63]));
        assert_eq!(run(&short, &[PUBLIC_KEY], t).reason, Reason::MalformedHeader);
        assert_eq!(run(SIGNATURE.trim_end_matches('='), &[PUBLIC_KEY], t).reason, Reason::MalformedHeader);
        assert_eq!(run(&format!("{short} {SIGNATURE}"), &[PUBLIC_KEY], t).reason, Reason::Ok);
    }

    #[test]
    fn public_keys_that_are_no_keys_are_configuration_errors() {
        let err = |secret: &str| keys(Scheme::Standard, &["whsec_AAE=", secret]).unwrap_err().to_string();
        assert_eq!(err("whpk_!!!!"), "secret 2 of 2 is not canonical base64 after its whpk_ prefix");
        assert!(err("whpk_AAE=").starts_with("secret 2 of 2 is not an Ed25519 public key"));
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert!(err(&format!("whpk_{}", ct::encode_base64(&identity))).contains("weak"));
        let private = format!("whsk_{SEED_B64}");
        let message = err(&private);
        assert!(message.contains("private key") && !message.contains(SEED_B64), "{message}");
        assert!(matches!(keys(Scheme::Standard, &[PUBLIC_KEY]).unwrap()[0], Key::Ed25519(_)));
    }
}
