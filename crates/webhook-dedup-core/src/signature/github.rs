//! GitHub: `X-Hub-Signature-256: sha256=<hex>` where the hex is
//! HMAC-SHA256 of the raw request body under the webhook secret (UTF-8).
//!
//! Source: GitHub Docs, "Validating webhook deliveries",
//! <https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries>.
//! GitHub signs no timestamp, so there is no replay window; the delivery id
//! (`X-GitHub-Delivery`) is what deduplication keys on. The legacy
//! `X-Hub-Signature: sha1=...` header is never consulted.

use super::{ct, Algorithm, Delivery, Encoding, OtherTag, TaggedFrame, Verdict};

/// The signature header, lower-cased.
pub const HEADER: &str = "x-hub-signature-256";
const TAG: &str = "sha256=";
/// The scheme's frame ([`super::TaggedFrame`]).
pub const FRAME: TaggedFrame = TaggedFrame {
    header: HEADER,
    tag: TAG,
    other: OtherTag::Named,
    encoding: Encoding::Hex,
    algorithm: Algorithm::Sha256,
};

/// Verify a GitHub delivery against every key.
pub fn verify(delivery: Delivery<'_>, keys: &[Vec<u8>]) -> Verdict {
    FRAME.header().verify(&delivery, keys, |key| ct::hmac_sha256(key, &[delivery.body]).to_vec())
}

/// The headers GitHub would send for `body` under `secret`.
pub fn sign(body: &[u8], secret: &[u8]) -> Vec<(&'static str, String)> {
    vec![("X-Hub-Signature-256", format!("{TAG}{}", hex::encode(ct::hmac_sha256(secret, &[body]))))]
}

untimed_mac_scheme!(Github, "github");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Headers;
    use crate::signature::Reason;

    const SECRET: &[u8] = b"It's a Secret to Everybody";
    /// GitHub Docs' published example.
    const DOC_SIG: &str = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    fn check(body: &[u8], values: &[&str], keys: &[&[u8]]) -> Verdict {
        let headers = Headers::from_pairs(values.iter().map(|v| ("X-Hub-Signature-256", *v)));
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        verify(Delivery { body, headers: &headers, url: None, method: None }, &keys)
    }

    #[test]
    fn documented_example() {
        assert_eq!(sign(b"Hello, World!", SECRET)[0].1, DOC_SIG);
        let v = check(b"Hello, World!", &[DOC_SIG], &[SECRET]);
        assert_eq!((v.reason, v.secret_index), (Reason::Ok, Some(0)));
    }

    #[test]
    fn rotation_reports_which_secret_matched() {
        let v = check(b"Hello, World!", &[DOC_SIG], &[b"old", SECRET]);
        assert_eq!((v.reason, v.secret_index), (Reason::Ok, Some(1)));
    }
}
