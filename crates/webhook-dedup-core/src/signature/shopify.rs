//! Shopify: `X-Shopify-Hmac-Sha256: <base64>` where the base64 is
//! HMAC-SHA256 of the raw request body under the app's client secret
//! (UTF-8).
//!
//! Source: Shopify Dev Docs, "Deliver webhooks through HTTPS", step
//! "Verify the webhook",
//! <https://shopify.dev/docs/apps/build/webhooks/subscribe/https>. Shopify
//! sends the canonical padded encoding, so only that is accepted; after a
//! client-secret rotation Shopify may sign with the old secret for a while,
//! so configure both. No timestamp is signed.

use super::{ct, Delivery, TaggedHeader, Verdict};

/// The signature header, lower-cased.
pub const HEADER: &str = "x-shopify-hmac-sha256";

/// Verify a Shopify delivery against every key.
pub fn verify(delivery: Delivery<'_>, keys: &[Vec<u8>]) -> Verdict {
    header().verify(&delivery, keys, |key| ct::hmac_sha256(key, &[delivery.body]).to_vec())
}

/// The bare base64 MAC (no tag, so no other version to name).
pub(crate) fn header() -> TaggedHeader<'static, impl Fn(&str) -> Option<Vec<u8>>> {
    TaggedHeader { header: HEADER, tag: "", other_tag: |_| false, decode: |b64: &str| ct::decode_base64(b64, Some(32)) }
}

/// The headers Shopify would send for `body` under `secret`.
pub fn sign(body: &[u8], secret: &[u8]) -> Vec<(&'static str, String)> {
    vec![("X-Shopify-Hmac-Sha256", ct::encode_base64(&ct::hmac_sha256(secret, &[body])))]
}

untimed_mac_scheme!(Shopify, "shopify");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Headers;
    use crate::signature::Reason;

    fn check(body: &[u8], value: &str) -> Reason {
        let headers = Headers::from_pairs([("X-Shopify-Hmac-Sha256", value)]);
        verify(Delivery { body, headers: &headers, url: None, method: None }, &[b"secret".to_vec()]).reason
    }

    #[test]
    fn sign_then_verify_and_reject() {
        let good = sign(b"{\"id\":1}", b"secret").remove(0).1;
        assert_eq!(check(b"{\"id\":1}", &good), Reason::Ok);
        assert_eq!(check(b"{\"id\":2}", &good), Reason::NoMatchingSignature);
        assert_eq!(check(b"{\"id\":1}", good.trim_end_matches('=')), Reason::MalformedHeader);
        assert_eq!(
            check(b"{\"id\":1}", &hex::encode(ct::hmac_sha256(b"secret", &[b"{\"id\":1}"]))),
            Reason::MalformedHeader
        );
    }
}
