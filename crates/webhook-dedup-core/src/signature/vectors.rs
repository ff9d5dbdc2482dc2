//! The shared test vectors (`tests/vectors/signatures-and-claims.json`,
//! computed independently with Python's hmac and openssl) as a
//! table-driven test of the pure verifiers.
//!
//! Every vector id is accounted for: every signature vector is verified
//! here; idempotency (`ID-*`) vectors are tests of the
//! claim functions (`src/tests/claim.rs`, `tests/isolation`), listed with
//! their test; idempotency vectors of what is not built yet are listed with
//! the reason, so the test fails the day an unlisted vector appears.

use super::Headers;
use serde_json::Value;

pub const VECTORS: &str = include_str!("../../../../tests/vectors/signatures-and-claims.json");

/// Our own vectors for the schemes the shared file lacks (Paddle, Twilio),
/// computed with Python's hmac and hashlib (see `docs/signatures.md` for
/// how to reproduce them with openssl). Same fields, plus `url`.
pub const OWN_VECTORS: &str = include_str!("../../../../tests/vectors/paddle-and-twilio.json");

/// The shared vectors.
pub fn all() -> Vec<Value> {
    parse(VECTORS)
}

/// Our own Paddle and Twilio vectors.
pub fn own() -> Vec<Value> {
    parse(OWN_VECTORS)
}

fn parse(text: &str) -> Vec<Value> {
    match serde_json::from_str(text).expect("a vectors file is JSON") {
        Value::Array(items) => items,
        _ => panic!("a vectors file is an array"),
    }
}

/// The secrets a vector configures: `secret` then `extra_secrets`.
pub fn secrets(v: &Value) -> Vec<Option<&str>> {
    let mut out = vec![v["secret"].as_str()];
    if let Some(extra) = v["extra_secrets"].as_array() {
        out.extend(extra.iter().map(Value::as_str));
    }
    out
}

pub fn headers(v: &Value) -> Headers {
    Headers::from_json(&v["headers"]).expect("vector headers are an object of strings")
}

pub fn body(v: &Value) -> Vec<u8> {
    hex::decode(v["body_hex"].as_str().unwrap()).unwrap()
}

/// The scheme (and generic-HMAC description) a vector's `scheme` names;
/// `None` for the idempotency vectors.
pub fn scheme_of(v: &Value) -> Option<(super::Scheme, Option<super::HmacSpec>)> {
    use super::{Algorithm, Encoding, HmacSpec, Scheme};
    match v["scheme"].as_str().unwrap() {
        "idempotency" => None,
        "standard_webhooks" => Some((Scheme::Standard, None)),
        "generic_hmac_sha256" => Some((
            Scheme::Hmac,
            Some(HmacSpec {
                header: "X-Signature".into(),
                prefix: String::new(),
                algorithm: Algorithm::Sha256,
                encoding: Encoding::Hex,
            }),
        )),
        other => Some((Scheme::parse(other).expect("a known scheme"), None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::{check_secrets, ct, keys, verify, Config, Delivery, Scheme};

    /// Idempotency vectors and the test that checks each.
    const CLAIM_VECTORS: [(&str, &str); 9] = [
        ("ID-01", "tests/isolation/specs/claim_race.spec"),
        ("ID-02", "tests::claim::duplicate_after_completion_returns_the_stored_result"),
        ("ID-03", "tests::claim::same_key_other_payload_is_a_conflict"),
        ("ID-04", "tests::claim::key_length_limits"),
        ("ID-05", "tests::claim::expired_lease_is_reclaimed_and_the_stale_token_fenced"),
        ("ID-10", "tests::claim::key_ignores_transport_headers"),
        ("ID-11", "tests::claim::expired_lease_is_reclaimed_and_the_stale_token_fenced"),
        // The multi-key claim is webhook_claim_many (sorted locking).
        ("ID-08", "tests/isolation/specs/claim_many_race.spec"),
        ("ID-07", "tests::maintenance::tests::id_07_a_retry_after_75_hours_is_still_a_duplicate"),
    ];

    /// The verdict of the pure verifier; a configuration error (a bad
    /// secret) counts as not valid.
    fn verdict(v: &Value) -> bool {
        let (scheme, hmac) = scheme_of(v).unwrap();
        let secrets = secrets(v);
        let Ok(secrets) = check_secrets(&secrets) else {
            return false;
        };
        if keys(scheme, &secrets).is_err() {
            return false;
        }
        let body = body(v);
        let headers = headers(v);
        let config = Config {
            secrets,
            tolerance_us: v["tolerance_s"].as_i64().map(|s| s * 1_000_000),
            now_us: v["now_unix"].as_i64().unwrap_or(0) * 1_000_000,
            hmac,
        };
        let url = v["url"].as_str();
        verify(scheme, Delivery { body: &body, headers: &headers, url, method: None }, &config).unwrap().valid()
    }

    #[test]
    fn every_vector_is_accounted_for_and_passes() {
        let mut checked = 0;
        for v in all() {
            let id = v["id"].as_str().unwrap();
            if scheme_of(&v).is_none() {
                assert!(CLAIM_VECTORS.iter().any(|(c, _)| *c == id), "{id} is not covered by a claim test");
                continue;
            }
            let expected = v["expected_valid"].as_bool().unwrap();
            assert_eq!(verdict(&v), expected, "{id}: {}", v["reason"]);
            checked += 1;
        }
        assert_eq!(checked, 45, "every signature vector");
    }

    /// Every test named in [`CLAIM_VECTORS`] exists (a spec file, or a
    /// `fn` in the `src/` file its path names).
    #[test]
    fn every_named_claim_test_exists() {
        // the repository: this crate is crates/webhook-dedup-core
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for (id, test) in CLAIM_VECTORS {
            if test.starts_with("tests/") {
                assert!(root.join(test).is_file(), "{id}: {test} is missing");
                continue;
            }
            let parts: Vec<&str> = test.split("::").collect();
            let file = root.join("src").join(parts[0]).join(format!("{}.rs", parts[1]));
            let source = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{id}: {}: {e}", file.display()));
            let name = parts.last().unwrap();
            assert!(source.contains(&format!("fn {name}(")), "{id}: no fn {name} in {}", file.display());
        }
    }

    #[test]
    fn own_paddle_and_twilio_vectors_pass() {
        let vectors = own();
        assert_eq!(vectors.len(), 14);
        for v in vectors {
            let expected = v["expected_valid"].as_bool().unwrap();
            assert_eq!(verdict(&v), expected, "{}: {}", v["id"], v["reason"]);
        }
    }

    /// Where a vector states the signature or key its inputs produce, our
    /// signers and key decoding produce exactly that.
    #[test]
    fn expected_values_match_our_signers() {
        let mut checked = 0;
        for v in all() {
            let id = v["id"].as_str().unwrap();
            let body = body(&v);
            let secret = v["secret"].as_str().unwrap_or_default().as_bytes();
            let scheme = scheme_of(&v).map(|(s, _)| s);
            if let (Some(want), Some(Scheme::Github)) = (v["expected_header"].as_str(), scheme) {
                assert_eq!(crate::signature::github::sign(&body, secret)[0].1, want, "{id}");
                checked += 1;
            }
            if let (Some(want), Some(Scheme::Shopify)) = (v["expected_header"].as_str(), scheme) {
                assert_eq!(crate::signature::shopify::sign(&body, secret)[0].1, want, "{id}");
                checked += 1;
            }
            if let (Some(want), Some(header)) = (v["expected_v1"].as_str(), v["headers"]["Stripe-Signature"].as_str()) {
                let t: i64 = header.split(',').next().unwrap().trim_start_matches("t=").parse().unwrap();
                assert_eq!(crate::signature::stripe::sign(&body, secret, t)[0].1, format!("t={t},v1={want}"), "{id}");
                checked += 1;
            }
            if let Some(want) = v["expected_hex"].as_str() {
                let mac = ct::hmac_sha256(secret, &[&body]);
                assert_eq!(hex::encode(mac), want, "{id}");
                assert_eq!(ct::encode_base64(&mac), v["expected_base64"].as_str().unwrap(), "{id}");
                checked += 1;
            }
            if let Some(want) = v["key_hex"].as_str() {
                let key = keys(Scheme::Standard, &[v["secret"].as_str().unwrap()]).unwrap();
                assert_eq!(hex::encode(key[0].mac().unwrap()), want, "{id}");
                checked += 1;
            }
        }
        assert_eq!(checked, 18, "every expected_header, expected_v1, expected_hex and key_hex");
    }
}
