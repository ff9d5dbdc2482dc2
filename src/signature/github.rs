//! GitHub: `X-Hub-Signature-256: sha256=<hex>` where the hex is
//! HMAC-SHA256 of the raw request body under the webhook secret (UTF-8).
//!
//! Source: GitHub Docs, "Validating webhook deliveries",
//! <https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries>.
//! GitHub signs no timestamp, so there is no replay window; the delivery id
//! (`X-GitHub-Delivery`) is what deduplication keys on. The legacy
//! `X-Hub-Signature: sha1=...` header is never consulted.

use super::{ct, Delivery, Reason, Verdict};

/// The signature header, lower-cased.
pub const HEADER: &str = "x-hub-signature-256";
const TAG: &str = "sha256=";

/// Verify a GitHub delivery against every secret.
pub fn verify(delivery: Delivery<'_>, secrets: &[&str]) -> Verdict {
    let values = delivery.headers.all(HEADER);
    if values.is_empty() {
        return Verdict::rejected(Reason::MissingHeader);
    }
    let mut candidates = Vec::with_capacity(values.len());
    let mut other_tag = false;
    for value in values {
        let value = value.trim();
        match value.strip_prefix(TAG) {
            Some(hex) => candidates.extend(ct::decode_hex(hex.trim(), 32)),
            None => other_tag |= value.contains('='),
        }
    }
    if candidates.is_empty() {
        return Verdict::rejected(if other_tag {
            Reason::UnsupportedVersion
        } else {
            Reason::MalformedHeader
        });
    }
    for (index, secret) in secrets.iter().enumerate() {
        let expected = ct::hmac_sha256(secret.as_bytes(), &[delivery.body]);
        if candidates.iter().any(|c| ct::equal(&expected, c)) {
            return Verdict {
                reason: Reason::Ok,
                secret_index: Some(index),
                signed_at: None,
            };
        }
    }
    Verdict::rejected(Reason::NoMatchingSignature)
}

/// The header value GitHub would send for `body` under `secret`.
pub fn sign(body: &[u8], secret: &str) -> String {
    format!(
        "{TAG}{}",
        hex::encode(ct::hmac_sha256(secret.as_bytes(), &[body]))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Headers;

    const SECRET: &str = "It's a Secret to Everybody";
    /// GitHub Docs' published example.
    const DOC_SIG: &str = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    fn check(body: &[u8], values: &[&str], secrets: &[&str]) -> Verdict {
        let headers = Headers::from_pairs(values.iter().map(|v| ("X-Hub-Signature-256", *v)));
        verify(
            Delivery {
                body,
                headers: &headers,
            },
            secrets,
        )
    }

    #[test]
    fn documented_example() {
        assert_eq!(sign(b"Hello, World!", SECRET), DOC_SIG);
        let v = check(b"Hello, World!", &[DOC_SIG], &[SECRET]);
        assert_eq!((v.reason, v.secret_index), (Reason::Ok, Some(0)));
    }

    #[test]
    fn rotation_reports_which_secret_matched() {
        let v = check(b"Hello, World!", &[DOC_SIG], &["old", SECRET]);
        assert_eq!((v.reason, v.secret_index), (Reason::Ok, Some(1)));
    }

    #[test]
    fn rejections_have_reasons() {
        let body = b"Hello, World!";
        assert_eq!(check(body, &[], &[SECRET]).reason, Reason::MissingHeader);
        assert_eq!(
            check(body, &["garbage"], &[SECRET]).reason,
            Reason::MalformedHeader
        );
        assert_eq!(
            check(body, &["sha256=zz"], &[SECRET]).reason,
            Reason::MalformedHeader
        );
        assert_eq!(
            check(body, &["sha1=01dc10d0"], &[SECRET]).reason,
            Reason::UnsupportedVersion
        );
        assert_eq!(
            check(b"Hello, World?", &[DOC_SIG], &[SECRET]).reason,
            Reason::NoMatchingSignature
        );
        assert_eq!(
            check(body, &[DOC_SIG], &["wrong"]).reason,
            Reason::NoMatchingSignature
        );
        // a truncated signature is a length mismatch, not a prefix match
        assert_eq!(
            check(body, &[&DOC_SIG[..40]], &[SECRET]).reason,
            Reason::MalformedHeader
        );
    }

    #[test]
    fn any_presented_value_may_match() {
        let v = check(b"Hello, World!", &["sha256=00", DOC_SIG], &[SECRET]);
        assert!(v.valid());
    }
}
