//! Typeform: `Typeform-Signature: sha256=<base64>` where the base64 is
//! HMAC-SHA256 of the raw request body under the webhook's secret (UTF-8,
//! set with the Webhooks API or in the form's Connect > Webhooks panel).
//!
//! Source: Typeform Developers, "Secure your webhooks",
//! <https://www.typeform.com/developers/webhooks/secure-your-webhooks/>
//! (the docs' Ruby example: `'sha256=' + Base64.strict_encode64(hash)`, the
//! canonical padded encoding, the only one accepted here). `sha256` is the
//! only algorithm; another `<algorithm>=` is `unsupported_version`. Typeform
//! signs no timestamp, so there is no replay window; the event id
//! (`event_id`) is in the signed body.

use super::{ct, Algorithm, Delivery, Encoding, OtherTag, TaggedFrame, Verdict};

/// The signature header, lower-cased.
pub const HEADER: &str = "typeform-signature";
const TAG: &str = "sha256=";
/// The scheme's frame ([`super::TaggedFrame`]).
pub const FRAME: TaggedFrame = TaggedFrame {
    header: HEADER,
    tag: TAG,
    other: OtherTag::Named,
    encoding: Encoding::Base64,
    algorithm: Algorithm::Sha256,
};

/// Verify a Typeform delivery against every key.
pub fn verify(delivery: Delivery<'_>, keys: &[Vec<u8>]) -> Verdict {
    FRAME.header().verify(&delivery, keys, |key| ct::hmac_sha256(key, &[delivery.body]).to_vec())
}

/// The headers Typeform would send for `body` under `secret`.
pub fn sign(body: &[u8], secret: &[u8]) -> Vec<(&'static str, String)> {
    vec![("Typeform-Signature", format!("{TAG}{}", ct::encode_base64(&ct::hmac_sha256(secret, &[body]))))]
}

untimed_mac_scheme!(Typeform, "typeform");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Headers;
    use crate::signature::Reason;

    /// Our vector (Typeform publishes none; `abc123` is the secret of
    /// Typeform's developer-relations examples):
    /// `printf '%s' '{"event_id":"01HFA7Q0ZP9Y",...}' | openssl dgst -sha256 -hmac abc123 -binary | base64`.
    const SECRET: &[u8] = b"abc123";
    const BODY: &[u8] = br#"{"event_id":"01HFA7Q0ZP9Y","event_type":"form_response","form_response":{"form_id":"lT4Z3j","token":"a3a12ec67a1365927098a606107fac15","submitted_at":"2023-11-14T22:13:20Z"}}"#;
    const SIG: &str = "sha256=92PHjvscV4ozEvCOqQBDnKjzG4aaIS3k3LuBmt2wtnk=";

    fn check(body: &[u8], values: &[&str], keys: &[&[u8]]) -> Verdict {
        let headers = Headers::from_pairs(values.iter().map(|v| ("Typeform-Signature", *v)));
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        verify(Delivery { body, headers: &headers, url: None, method: None }, &keys)
    }

    #[test]
    fn own_vector_signs_and_verifies() {
        assert_eq!(sign(BODY, SECRET), vec![("Typeform-Signature", SIG.to_string())]);
        let v = check(BODY, &[SIG], &[b"old", SECRET]);
        assert_eq!((v.reason, v.secret_index, v.signed_at), (Reason::Ok, Some(1), None));
        assert_eq!(check(BODY, &["sha256=AAAA", SIG], &[SECRET]).reason, Reason::MalformedHeader, "sent twice");
    }
}
