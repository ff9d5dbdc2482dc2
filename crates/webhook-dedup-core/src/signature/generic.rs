//! Generic HMAC (scheme `hmac`): a caller-named header holding an optional
//! prefix and the hex or base64 HMAC (SHA-1, SHA-256 or SHA-512) of the raw
//! body under the secret (UTF-8). This covers the many providers that sign
//! the body alone, for example `X-Signature: sha256=<hex>`.
//!
//! Source: RFC 2104 (HMAC) and the provider's own documentation of its
//! header; there is no timestamp, so no replay window.

use super::scheme::{mac_keys, Check, SchemeRules};
use super::{ct, Delivery, HmacSpec, TaggedHeader, Verdict};
use super::{Key, SignRequest, Signed};
use crate::error::Error;

/// Verify a delivery whose signature is described by `spec`.
pub fn verify(delivery: Delivery<'_>, spec: &HmacSpec, keys: &[Vec<u8>]) -> Verdict {
    let header = TaggedHeader {
        header: &spec.header.to_ascii_lowercase(),
        tag: &spec.prefix,
        // the caller named the prefix: a value without it is another version
        other_tag: |_| true,
        decode: |encoded: &str| spec.encoding.decode(encoded, spec.algorithm.mac_len()),
    };
    header.verify(&delivery, keys, |key| ct::hmac(spec.algorithm, key, &[delivery.body]))
}

/// The header value a sender would send for `body` under `secret`.
pub fn sign(body: &[u8], secret: &[u8], spec: &HmacSpec) -> String {
    format!("{}{}", spec.prefix, spec.encoding.encode(&ct::hmac(spec.algorithm, secret, &[body])))
}

/// Scheme `hmac`'s registration ([`super::scheme`]).
pub struct Generic;

impl SchemeRules for Generic {
    const NAME: &'static str = "hmac";

    fn verify(delivery: Delivery<'_>, keys: &[Key], check: &Check<'_>) -> Result<Verdict, Error> {
        let spec = check.hmac.ok_or_else(|| {
            Error::invalid("scheme hmac needs signature_header (and optionally signature_prefix, algorithm, encoding)")
        })?;
        Ok(verify(delivery, spec, &mac_keys(keys)))
    }

    fn sign(body: &[u8], key: &[u8], request: &SignRequest<'_>) -> Result<Signed, Error> {
        let spec = request.hmac.as_ref().ok_or_else(|| Error::invalid("scheme hmac needs signature_header"))?;
        Ok(Signed::Headers(vec![(spec.header.clone(), sign(body, key, spec))]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Reason;
    use crate::signature::{Algorithm, Encoding, Headers};

    #[test]
    fn every_algorithm_and_encoding_round_trips() {
        for algorithm in Algorithm::ALL {
            for encoding in [Encoding::Hex, Encoding::Base64] {
                let spec = HmacSpec { header: "X-Sig".into(), prefix: "v=".into(), algorithm, encoding };
                let value = sign(b"body", b"k", &spec);
                let headers = Headers::from_pairs([("x-sig", value.as_str())]);
                let d = Delivery { body: b"body", headers: &headers, url: None, method: None };
                assert_eq!(verify(d, &spec, &[b"k".to_vec()]).reason, Reason::Ok, "{algorithm:?} {encoding:?}");
                let d = Delivery { body: b"bodY", headers: &headers, url: None, method: None };
                assert_eq!(verify(d, &spec, &[b"k".to_vec()]).reason, Reason::NoMatchingSignature);
                let other = Headers::from_pairs([("x-sig", value.trim_start_matches("v="))]);
                let d = Delivery { body: b"body", headers: &other, url: None, method: None };
                assert_eq!(verify(d, &spec, &[b"k".to_vec()]).reason, Reason::UnsupportedVersion);
            }
        }
    }
}
