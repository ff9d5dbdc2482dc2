//! The shared test vectors (`tests/vectors/signatures-and-claims.json`,
//! computed independently with Python's hmac and openssl) as a
//! table-driven test of the pure verifiers.
//!
//! Every vector id is accounted for: signature vectors of an implemented
//! scheme are verified here; idempotency (`ID-*`) vectors are tests of the
//! claim functions (`src/api/tests.rs`, `tests/isolation`), listed with
//! their test; vectors of what is not implemented yet are listed with the
//! reason, so the test fails the day an unlisted vector appears.

use super::Headers;
use serde_json::Value;

pub const VECTORS: &str = include_str!("../../tests/vectors/signatures-and-claims.json");

pub fn all() -> Vec<Value> {
    match serde_json::from_str(VECTORS).expect("the vectors file is JSON") {
        Value::Array(items) => items,
        _ => panic!("the vectors file is an array"),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::{check_secrets, ct, verify, Config, Delivery, Scheme};

    /// Schemes of the shared vectors that this build does not verify yet
    /// (the signature issue adds them).
    const NOT_YET_IMPLEMENTED: [&str; 3] = ["slack", "shopify", "standard_webhooks"];

    /// Idempotency vectors and the test that checks each.
    const CLAIM_VECTORS: [(&str, &str); 7] = [
        ("ID-01", "tests/isolation/specs/claim_race.spec"),
        (
            "ID-02",
            "api::tests::duplicate_after_completion_returns_the_stored_result",
        ),
        ("ID-03", "api::tests::same_key_other_payload_is_a_conflict"),
        ("ID-04", "api::tests::key_length_limits"),
        (
            "ID-05",
            "api::tests::expired_lease_is_reclaimed_and_the_stale_token_fenced",
        ),
        ("ID-10", "api::tests::key_ignores_transport_headers"),
        (
            "ID-11",
            "api::tests::expired_lease_is_reclaimed_and_the_stale_token_fenced",
        ),
    ];

    /// Idempotency vectors that need what is not built yet.
    const CLAIM_VECTORS_NOT_YET: [(&str, &str); 2] = [
        (
            "ID-07",
            "needs Standard Webhooks signatures and retention past 75 h",
        ),
        ("ID-08", "needs a multi-key claim, which does not exist"),
    ];

    /// The verdict of the pure verifier for a signature vector; a
    /// configuration error (bad secret) counts as not valid.
    fn verdict(v: &Value, scheme: Scheme) -> bool {
        let secrets = secrets(v);
        let Ok(secrets) = check_secrets(&secrets) else {
            return false;
        };
        let body = body(v);
        let headers = headers(v);
        let config = Config {
            secrets,
            tolerance_s: v["tolerance_s"].as_i64(),
            now_unix: v["now_unix"].as_i64().unwrap_or(0),
        };
        verify(
            scheme,
            Delivery {
                body: &body,
                headers: &headers,
            },
            &config,
        )
        .unwrap()
        .valid()
    }

    #[test]
    fn every_vector_is_accounted_for_and_passes() {
        let mut checked = 0;
        for v in all() {
            let id = v["id"].as_str().unwrap();
            let scheme = v["scheme"].as_str().unwrap();
            let expected = v["expected_valid"].as_bool().unwrap();
            match scheme {
                "github" | "stripe" => {
                    let got = verdict(&v, Scheme::parse(scheme).unwrap());
                    assert_eq!(got, expected, "{id}: {}", v["reason"]);
                    checked += 1;
                }
                "generic_hmac_sha256" => {
                    // The HMAC primitive and the secret policy: X-Signature is
                    // the hex HMAC-SHA256 of the body under the secret.
                    let body = body(&v);
                    let secret = v["secret"].as_str().unwrap();
                    let mac = ct::hmac_sha256(secret.as_bytes(), &[&body]);
                    assert_eq!(
                        hex::encode(mac),
                        v["expected_hex"].as_str().unwrap(),
                        "{id}"
                    );
                    let presented =
                        ct::decode_hex(v["headers"]["X-Signature"].as_str().unwrap(), 32).unwrap();
                    let got = check_secrets(&[Some(secret)]).is_ok() && ct::equal(&mac, &presented);
                    assert_eq!(got, expected, "{id}: {}", v["reason"]);
                    checked += 1;
                }
                "idempotency" => assert!(
                    CLAIM_VECTORS
                        .iter()
                        .chain(&CLAIM_VECTORS_NOT_YET)
                        .any(|(v, _)| *v == id),
                    "{id} is not covered by a claim test"
                ),
                other => assert!(
                    NOT_YET_IMPLEMENTED.contains(&other),
                    "{id}: scheme {other} has no test"
                ),
            }
        }
        assert_eq!(checked, 5 + 6 + 13, "generic, github and stripe vectors");
    }

    #[test]
    fn expected_signatures_match_our_signers() {
        for v in all() {
            let body = body(&v);
            let secret = v["secret"].as_str().unwrap_or_default();
            if v["scheme"] == "github" {
                assert_eq!(
                    crate::signature::github::sign(&body, secret),
                    v["expected_header"].as_str().unwrap(),
                    "{}",
                    v["id"]
                );
            }
            if let (Some(want), Some(t)) = (
                v["expected_v1"].as_str(),
                v["headers"]["Stripe-Signature"].as_str(),
            ) {
                let t: i64 = t
                    .split(',')
                    .next()
                    .unwrap()
                    .trim_start_matches("t=")
                    .parse()
                    .unwrap();
                assert_eq!(
                    crate::signature::stripe::sign(&body, secret, t),
                    format!("t={t},v1={want}"),
                    "{}",
                    v["id"]
                );
            }
        }
    }
}
