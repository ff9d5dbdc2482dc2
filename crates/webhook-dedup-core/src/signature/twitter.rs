//! X (Twitter) webhooks, as the Account Activity API and the v2 Webhooks
//! API send them: `x-twitter-webhooks-signature: sha256=<base64>` where the
//! base64 is HMAC-SHA256 of the raw request body under the app's consumer
//! secret (API secret key, UTF-8).
//!
//! Source: X developer docs, "Webhooks: Quickstart", sections "2. The CRC
//! check" and "3. Securing webhooks",
//! <https://docs.x.com/x-api/webhooks/quickstart>, and "Account Activity
//! API: Enterprise", section "Securing webhooks",
//! <https://docs.x.com/x-api/enterprise-gnip-2.0/fundamentals/account-activity#securing-webhooks>.
//! X signs no timestamp, so there is no replay window (as GitHub); the
//! base64 is the canonical padded encoding, the only one accepted.
//!
//! Challenge-response check (CRC): X sends
//! `GET <webhook url>?crc_token=<token>` at registration, hourly (the v2
//! API; "roughly every 24 hours" for the enterprise API) and on demand; the
//! receiver answers 200 within 3 s with the JSON object
//! `{"response_token":"sha256=<base64 HMAC-SHA256 of crc_token>"}` under the
//! consumer secret ([`crc_response_token`]).
//!
//! Security: the CRC answer is the same MAC, under the same key and in the
//! same format, as a POST signature, so a receiver that answers any
//! `crc_token` is a signing oracle: an attacker asks for the CRC of a forged
//! JSON body and POSTs that body with the answer as its
//! `x-twitter-webhooks-signature`. [`crc_response_token`] therefore answers
//! only tokens of at most [`MAX_CRC_TOKEN_LEN`] characters of the base64 and
//! base64url alphabets plus `=`, which no JSON object body (it starts with
//! `{`) can be, and [`verify`] refuses a body that does not start with `{`
//! (after whitespace): X sends JSON objects only, and any other body could
//! be a CRC answer. So no answer to a CRC is ever a valid delivery.

use super::{ct, untimed, Algorithm, Delivery, Encoding, OtherTag, Reason, TaggedFrame, Verdict};

/// The signature header, lower-cased.
pub const HEADER: &str = "x-twitter-webhooks-signature";
/// The longest `crc_token` answered, in characters (ASCII bytes).
pub const MAX_CRC_TOKEN_LEN: usize = 255;
const TAG: &str = "sha256=";
/// The scheme's frame ([`super::TaggedFrame`]).
pub const FRAME: TaggedFrame = TaggedFrame {
    header: HEADER,
    tag: TAG,
    other: OtherTag::Named,
    encoding: Encoding::Base64,
    algorithm: Algorithm::Sha256,
};

/// Verify an X delivery against every key.
pub fn verify(delivery: Delivery<'_>, keys: &[Vec<u8>]) -> Verdict {
    let candidates = match FRAME.header().signatures(&delivery) {
        Ok(candidates) => candidates,
        Err(verdict) => return verdict,
    };
    // Not a JSON object: never an X delivery, and possibly a CRC answer
    // obtained for it (module doc). No MAC is computed.
    if delivery.body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Verdict::rejected(Reason::NoMatchingSignature);
    }
    untimed(keys, &candidates, |key| ct::hmac_sha256(key, &[delivery.body]).to_vec())
}

/// `sha256=` and the base64 HMAC-SHA256 of `message` under `key`: the POST
/// signature of a body, and the CRC answer to a token.
fn signature(key: &[u8], message: &[u8]) -> String {
    format!("{TAG}{}", ct::encode_base64(&ct::hmac_sha256(key, &[message])))
}

/// The headers X would send for `body` under `secret`.
pub fn sign(body: &[u8], secret: &[u8]) -> Vec<(&'static str, String)> {
    vec![("x-twitter-webhooks-signature", signature(secret, body))]
}

/// The `response_token` of X's CRC for `crc_token` under `key` (the consumer
/// secret's bytes): `sha256=` and the base64 HMAC-SHA256 of the token.
/// `Err` for a token that is empty, longer than [`MAX_CRC_TOKEN_LEN`] or
/// not made of `A-Z a-z 0-9 + / - _ =` (see the module doc: anything else
/// could be a body to sign); the message never echoes the key or the token.
pub fn crc_response_token(key: &[u8], crc_token: &str) -> Result<String, &'static str> {
    if crc_token.is_empty() {
        return Err("the crc_token is empty");
    }
    if crc_token.len() > MAX_CRC_TOKEN_LEN {
        return Err("the crc_token is longer than 255 characters");
    }
    if !crc_token.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_' | b'=')) {
        return Err("the crc_token has a character outside the base64 and base64url alphabets and '='");
    }
    Ok(signature(key, crc_token.as_bytes()))
}

untimed_mac_scheme!(Twitter, "twitter");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Headers;

    /// The example consumer secret and crc_token of Twitter developer
    /// relations' CRC examples (X's docs publish no pair whose secret is
    /// known). Reproduce the answer with
    /// `printf '%s' 9b4507b3-9040-4669-9ca3-6b94edb50553 | openssl dgst -sha256 -binary
    ///  -hmac z3ZX4v7mAAUGykl3EcmkqbartmuW8VFOOzCloLx9Q45P0hLrFu | base64`.
    const SECRET: &[u8] = b"z3ZX4v7mAAUGykl3EcmkqbartmuW8VFOOzCloLx9Q45P0hLrFu";
    const CRC_TOKEN: &str = "9b4507b3-9040-4669-9ca3-6b94edb50553";
    const CRC_RESPONSE: &str = "sha256=Cytd4Sq+NvEcV3MMrXxWJGJx5A+y/lXzzU2Maartkx8=";
    const BODY: &[u8] = br#"{"for_user_id":"2244994945","tweet_create_events":[]}"#;
    /// Our own vector: `printf '%s' '{"for_user_id":"2244994945","tweet_create_events":[]}'
    /// | openssl dgst -sha256 -binary -hmac z3ZX4v7mAAUGykl3EcmkqbartmuW8VFOOzCloLx9Q45P0hLrFu | base64`.
    const SIG: &str = "sha256=CpOc2dZ+JrkFhzkAW3gWETdo1w8Mx1i/MpqTbkrylcw=";

    /// The CRC answer for a token is a valid signature of the token as a
    /// body; verify refuses such a body (it is no JSON object).
    #[test]
    fn a_crc_answer_is_never_a_valid_delivery() {
        let answer = crc_response_token(SECRET, CRC_TOKEN).unwrap();
        let headers = Headers::from_pairs([(HEADER, answer.as_str())]);
        let keys = vec![SECRET.to_vec()];
        let v = verify(Delivery { body: CRC_TOKEN.as_bytes(), headers: &headers, url: None, method: None }, &keys);
        assert_eq!(v.reason, Reason::NoMatchingSignature);
        assert_eq!(answer, signature(SECRET, CRC_TOKEN.as_bytes()), "the same MAC as a POST signature");
    }

    fn check(body: &[u8], values: &[&str], keys: &[&[u8]]) -> Verdict {
        let headers = Headers::from_pairs(values.iter().map(|v| ("X-Twitter-Webhooks-Signature", *v)));
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        verify(Delivery { body, headers: &headers, url: None, method: None }, &keys)
    }

    #[test]
    fn crc_example() {
        assert_eq!(crc_response_token(SECRET, CRC_TOKEN).unwrap(), CRC_RESPONSE);
    }

    #[test]
    fn own_vector_signs_and_verifies() {
        assert_eq!(sign(BODY, SECRET), vec![("x-twitter-webhooks-signature", SIG.to_string())]);
        let v = check(BODY, &[SIG], &[b"old", SECRET]);
        assert_eq!((v.reason, v.secret_index, v.signed_at), (Reason::Ok, Some(1), None));
        assert_eq!(check(BODY, &["sha256=AAAA", SIG], &[SECRET]).reason, Reason::MalformedHeader, "sent twice");
    }

    #[test]
    fn crc_tokens_outside_the_alphabet_are_refused() {
        let ok: [&str; 4] = ["A", "foo", "a+b/c-d_e==", &"x".repeat(MAX_CRC_TOKEN_LEN)];
        for token in ok {
            assert!(crc_response_token(SECRET, token).is_ok(), "{token:?}");
        }
        let json = std::str::from_utf8(BODY).unwrap();
        let bad: [&str; 9] = ["", json, "{}", "a b", "a.b", "a%2B", "é", "a\n", &"x".repeat(MAX_CRC_TOKEN_LEN + 1)];
        for token in bad {
            let err = crc_response_token(SECRET, token).unwrap_err();
            assert!(!err.contains("z3ZX4v7m") && (token.is_empty() || !err.contains(token)), "{err}");
        }
    }

    /// The oracle the filter closes: the CRC answer to a body is exactly
    /// that body's POST signature.
    #[test]
    fn the_crc_of_a_body_would_be_its_signature() {
        assert_eq!(signature(SECRET, BODY), SIG);
        assert!(crc_response_token(SECRET, std::str::from_utf8(BODY).unwrap()).is_err());
    }
}
