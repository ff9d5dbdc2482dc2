//! The signature header parsers and every scheme's verifier on hostile
//! header maps, bodies, URLs and clocks: no input panics, only a replay
//! window past 365 days is refused (22023), and a verdict names a secret
//! only when it is valid or judged on its time.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use webhook_dedup_core::signature::{
    calendly, hubspot, paddle, stripe, twitch, verify, Algorithm, Config, Delivery, Encoding, Headers, HmacSpec,
    Reason, Scheme,
};

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    scheme: u8,
    header_json: &'a str,
    headers: Vec<(&'a str, &'a str)>,
    body: &'a [u8],
    url: &'a str,
    now_s: i64,
    tolerance_s: Option<u32>,
}

/// Valid secrets of every kind: MAC secrets, and the public keys of the
/// schemes that take them (the test vectors' keys: Discord's and
/// SendGrid's published examples, a Standard Webhooks `whpk_` key).
fn secrets(scheme: Scheme) -> Vec<&'static str> {
    match scheme {
        Scheme::Standard => vec!["whsec_AAEC", "whpk_ZlN4eg7dSSqi0moX9hQUk3orrOouK3QVQSlJa248c/g="],
        Scheme::Discord => vec!["b5fc4af677fc5c8d60faebe7e1c9e18c383bc9edc1cb7a91bda54e2711b6b20f"],
        Scheme::Sendgrid => vec![
            "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g==",
        ],
        _ => vec!["secret", "whsec_AAEC"],
    }
}

fuzz_target!(|input: Input<'_>| {
    // the header map from jsonb text, as webhook_verify reads it: a name
    // is found whatever its case was
    if let Ok(headers) = Headers::from_json_text(input.header_json) {
        if let Some((name, _)) = input.headers.first() {
            let _ = headers.all(&name.to_ascii_lowercase());
        }
    }
    for (_, value) in &input.headers {
        let _ = stripe::parse(value);
        let _ = paddle::parse(value);
        let _ = calendly::parse(value);
        let _ = twitch::parse_timestamp(value);
        let _ = hubspot::signed_uri(value);
    }
    let headers = Headers::from_pairs(input.headers.iter().copied());
    let scheme = Scheme::ALL[usize::from(input.scheme) % Scheme::ALL.len()];
    let secrets = secrets(scheme);
    let config = Config {
        secrets: secrets.clone(),
        tolerance_us: input.tolerance_s.map(|t| i64::from(t) * 1_000_000),
        now_us: input.now_s.saturating_mul(1_000_000),
        hmac: (scheme == Scheme::Hmac).then(|| HmacSpec {
            header: "X-Signature".into(),
            prefix: "sha256=".into(),
            algorithm: Algorithm::Sha256,
            encoding: Encoding::Hex,
        }),
    };
    let url = scheme.signs_url().then_some(input.url);
    let method = (scheme == Scheme::Hubspot).then_some("POST");
    let delivery = Delivery { body: input.body, headers: &headers, url, method };
    let verdict = match verify(scheme, delivery, &config) {
        Ok(verdict) => verdict,
        Err(error) => {
            // the secrets are valid: only a tolerance past 365 days is refused
            assert!(input.tolerance_s.is_some_and(|t| i64::from(t) > 365 * 86_400), "{error}");
            assert_eq!(error.sqlstate(), "22023", "{error}");
            return;
        }
    };
    if let Some(index) = verdict.secret_index {
        assert!(index < secrets.len(), "{verdict:?}");
        assert!(
            matches!(verdict.reason, Reason::Ok | Reason::TimestampTooOld | Reason::TimestampTooNew),
            "{verdict:?}"
        );
    }
});
