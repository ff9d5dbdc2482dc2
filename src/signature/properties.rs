//! Property tests of every scheme (proptest): hostile input never panics,
//! signing then verifying round-trips, and changing any byte of the body,
//! the signed timestamp or the signature makes verification fail.
//! `fuzz_parsers` runs the no-panic property with many more cases; it is
//! ignored by default and run by `scripts/fuzz.sh`.

use super::*;
use proptest::prelude::*;

/// A delivery as a sender signed it.
#[derive(Debug, Clone)]
struct Signed {
    headers: Vec<(String, String)>,
    url: Option<String>,
    method: Option<String>,
}

/// The URL and method a HubSpot delivery is signed for: the URI carries
/// encodings HubSpot decodes (`%3A`, `%40`) and one it does not (`%20`).
const HUBSPOT_URI: &str = "https://example.com/hubspot?from=a%40b.c&q=x%3Ay%20z";

const SPEC: fn() -> HmacSpec = || HmacSpec {
    header: "X-Signature".into(),
    prefix: "sha512=".into(),
    algorithm: Algorithm::Sha512,
    encoding: Encoding::Base64,
};

/// The secret string configured for `scheme` from raw key material.
fn secret_for(scheme: Scheme, key: &[u8]) -> String {
    match scheme {
        Scheme::Standard => format!("whsec_{}", ct::encode_base64(key)),
        _ => format!("k{}", hex::encode(key)),
    }
}

fn sign(scheme: Scheme, body: &[u8], secret: &str, t: i64) -> Signed {
    let key = keys(scheme, &[secret]).unwrap().remove(0);
    let owned = |pairs: Vec<(&str, String)>| pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    let headers_only = |pairs| Signed { headers: owned(pairs), url: None, method: None };
    match scheme {
        Scheme::Github => headers_only(github::sign(body, &key)),
        Scheme::Stripe => headers_only(stripe::sign(body, &key, t)),
        Scheme::Shopify => headers_only(shopify::sign(body, &key)),
        Scheme::Slack => headers_only(slack::sign(body, &key, t)),
        Scheme::Standard => headers_only(standard::sign(body, &key, "msg_prop", t)),
        Scheme::Paddle => headers_only(paddle::sign(body, &key, t)),
        Scheme::Twilio => {
            // JSON mode: the raw body is covered byte for byte (in form
            // mode Twilio signs decoded parameters, so `+` and `%20` are
            // the same signed text, as in Twilio's own libraries).
            use sha2::Digest;
            let url = format!("https://example.com/hook?bodySHA256={}", hex::encode(sha2::Sha256::digest(body)));
            Signed { headers: owned(twilio::sign(&url, body, &key)), url: Some(url), method: None }
        }
        Scheme::Zoom => headers_only(zoom::sign(body, &key, t)),
        Scheme::Twitter => headers_only(twitter::sign(body, &key)),
        Scheme::Square => {
            let url = "https://example.com/square?x=1".to_string();
            Signed { headers: owned(square::sign(&url, body, &key)), url: Some(url), method: None }
        }
        Scheme::Hubspot => Signed {
            headers: owned(hubspot::sign("POST", HUBSPOT_URI, body, &key, t * 1_000)),
            url: Some(HUBSPOT_URI.into()),
            method: Some("POST".into()),
        },
        Scheme::Twitch => headers_only(twitch::sign(body, &key, "msg_prop", &twitch::timestamp(t * 1_000_000))),
        Scheme::Intercom => headers_only(intercom::sign(body, &key)),
        Scheme::Typeform => headers_only(typeform::sign(body, &key)),
        Scheme::Calendly => headers_only(calendly::sign(body, &key, t)),
        Scheme::Hmac => Signed {
            headers: vec![("X-Signature".into(), generic::sign(body, &key, &SPEC()))],
            url: None,
            method: None,
        },
    }
}

/// A body as `scheme`'s provider sends it: X sends JSON objects only, and
/// its verifier refuses anything else (see `twitter`).
fn as_sent(scheme: Scheme, body: Vec<u8>) -> Vec<u8> {
    match scheme {
        Scheme::Twitter => [b"{".as_slice(), &body].concat(),
        _ => body,
    }
}

fn check(scheme: Scheme, body: &[u8], signed: &Signed, secret: &str, now: i64) -> Reason {
    let headers = Headers::from_pairs(signed.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let config = Config {
        secrets: vec![secret],
        tolerance_us: None,
        now_us: now.saturating_mul(1_000_000),
        hmac: (scheme == Scheme::Hmac).then(SPEC),
    };
    let delivery = Delivery { body, headers: &headers, url: signed.url.as_deref(), method: signed.method.as_deref() };
    verify(scheme, delivery, &config).unwrap().reason
}

/// Where the MAC sits in a scheme's signature header: the header, the text
/// right before the encoded MAC, and its encoding.
fn mac_location(scheme: Scheme) -> (&'static str, &'static str, Encoding) {
    match scheme {
        Scheme::Github => ("X-Hub-Signature-256", "sha256=", Encoding::Hex),
        Scheme::Stripe => ("Stripe-Signature", "v1=", Encoding::Hex),
        Scheme::Shopify => ("X-Shopify-Hmac-Sha256", "", Encoding::Base64),
        Scheme::Slack => ("X-Slack-Signature", "v0=", Encoding::Hex),
        Scheme::Standard => ("webhook-signature", "v1,", Encoding::Base64),
        Scheme::Paddle => ("Paddle-Signature", "h1=", Encoding::Hex),
        Scheme::Twilio => ("X-Twilio-Signature", "", Encoding::Base64),
        Scheme::Zoom => ("x-zm-signature", "v0=", Encoding::Hex),
        Scheme::Twitter => ("x-twitter-webhooks-signature", "sha256=", Encoding::Base64),
        Scheme::Square => ("x-square-hmacsha256-signature", "", Encoding::Base64),
        Scheme::Hubspot => ("X-HubSpot-Signature-v3", "", Encoding::Base64),
        Scheme::Twitch => ("Twitch-Eventsub-Message-Signature", "sha256=", Encoding::Hex),
        Scheme::Intercom => ("X-Hub-Signature", "sha1=", Encoding::Hex),
        Scheme::Typeform => ("Typeform-Signature", "sha256=", Encoding::Base64),
        Scheme::Calendly => ("Calendly-Webhook-Signature", "v1=", Encoding::Hex),
        Scheme::Hmac => ("X-Signature", "sha512=", Encoding::Base64),
    }
}

/// Flip bit `bit` of the MAC in the signature header (re-encoded, so the
/// header stays well-formed and only the MAC differs).
fn flip_mac(scheme: Scheme, signed: &Signed, bit: usize) -> Signed {
    let (name, marker, encoding) = mac_location(scheme);
    let mut out = signed.clone();
    let value = &mut out.headers.iter_mut().find(|(k, _)| k == name).unwrap().1;
    let at = if marker.is_empty() { 0 } else { value.rfind(marker).unwrap() + marker.len() };
    let mut mac = match encoding {
        Encoding::Hex => hex::decode(&value[at..]).unwrap(),
        Encoding::Base64 => ct::decode_base64(&value[at..], None).unwrap(),
    };
    let bit = bit % (mac.len() * 8);
    mac[bit / 8] ^= 1 << (bit % 8);
    value.replace_range(at.., &encoding.encode(&mac));
    out
}

/// Move the signed timestamp by `delta` seconds without re-signing.
fn shift_timestamp(scheme: Scheme, signed: &Signed, t: i64, delta: i64) -> Signed {
    let mut out = signed.clone();
    let (name, from, to) = match scheme {
        Scheme::Stripe => ("Stripe-Signature", t.to_string(), (t + delta).to_string()),
        Scheme::Slack => ("X-Slack-Request-Timestamp", t.to_string(), (t + delta).to_string()),
        Scheme::Standard => ("webhook-timestamp", t.to_string(), (t + delta).to_string()),
        Scheme::Paddle => ("Paddle-Signature", t.to_string(), (t + delta).to_string()),
        Scheme::Zoom => ("x-zm-request-timestamp", t.to_string(), (t + delta).to_string()),
        Scheme::Calendly => ("Calendly-Webhook-Signature", t.to_string(), (t + delta).to_string()),
        Scheme::Hubspot => ("X-HubSpot-Request-Timestamp", (t * 1_000).to_string(), ((t + delta) * 1_000).to_string()),
        Scheme::Twitch => (
            "Twitch-Eventsub-Message-Timestamp",
            twitch::timestamp(t * 1_000_000),
            twitch::timestamp((t + delta) * 1_000_000),
        ),
        _ => unreachable!("{scheme:?} signs no timestamp"),
    };
    let value = &mut out.headers.iter_mut().find(|(k, _)| k == name).unwrap().1;
    assert!(value.contains(&from), "{scheme:?}: {value} holds {from}");
    *value = value.replacen(&from, &to, 1);
    out
}

fn scheme() -> impl Strategy<Value = Scheme> {
    proptest::sample::select(Scheme::ALL.to_vec())
}

/// Header values an attacker controls: arbitrary text, and text near the
/// formats the parsers expect.
fn hostile_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "(t=|ts=|v1=|v0=|h1=|sha1=|sha256=|v1,|v1a,)[0-9a-fA-F=,; +/]{0,80}",
        "[0-9]{0,16}",
        "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{0,12})?(Z|[+-][0-9]{2}:[0-9]{2})?",
        "[ ,;=]{0,8}(t=[0-9]{0,14}|ts=-?[0-9]{0,20})[,;]( ?v1=[0-9a-f]{0,70}[,;]?){0,4}",
    ]
}

/// Every header any scheme reads, each with a hostile value or absent.
fn hostile_headers() -> impl Strategy<Value = Vec<(&'static str, String)>> {
    let names = vec![
        "X-Hub-Signature-256",
        "Stripe-Signature",
        "X-Shopify-Hmac-Sha256",
        "X-Slack-Signature",
        "X-Slack-Request-Timestamp",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "svix-signature",
        "Paddle-Signature",
        "X-Twilio-Signature",
        "X-Zm-Signature",
        "X-Zm-Request-Timestamp",
        "X-Twitter-Webhooks-Signature",
        "X-Square-HmacSha256-Signature",
        "X-HubSpot-Signature-v3",
        "X-HubSpot-Request-Timestamp",
        "Twitch-Eventsub-Message-Id",
        "Twitch-Eventsub-Message-Timestamp",
        "Twitch-Eventsub-Message-Signature",
        "X-Hub-Signature",
        "Typeform-Signature",
        "Calendly-Webhook-Signature",
        "X-Signature",
    ];
    proptest::collection::vec((proptest::sample::select(names), hostile_value()), 0..6)
}

fn never_panics(scheme: Scheme, headers: &[(&str, String)], body: &[u8], url: &str, now: i64, tolerance: i64) {
    let headers = Headers::from_pairs(headers.iter().map(|(k, v)| (*k, v.as_str())));
    let config = Config {
        secrets: vec!["secret", "whsec_AAEC"],
        tolerance_us: Some(tolerance.saturating_mul(1_000_000)),
        now_us: now.saturating_mul(1_000_000),
        hmac: (scheme == Scheme::Hmac).then(SPEC),
    };
    let url = scheme.signs_url().then_some(url);
    let method = (scheme == Scheme::Hubspot).then_some("POST");
    let _ = verify(scheme, Delivery { body, headers: &headers, url, method }, &config);
}

proptest! {
    #[test]
    fn hostile_input_never_panics(
        scheme in scheme(),
        headers in hostile_headers(),
        body in proptest::collection::vec(any::<u8>(), 0..64),
        url in "(https?://)?[a-z:@\\[\\]0-9.]{0,20}(/[a-z?=&%0-9A-F]{0,20})?",
        now in any::<i64>(),
        tolerance in 0..i64::MAX,
    ) {
        never_panics(scheme, &headers, &body, &url, now, tolerance);
    }

    #[test]
    fn header_json_text_never_panics(text in any::<String>()) {
        let _ = Headers::from_json_text(&text);
    }

    #[test]
    fn sign_then_verify_round_trips(
        scheme in scheme(),
        body in proptest::collection::vec(any::<u8>(), 0..256),
        key in proptest::collection::vec(any::<u8>(), 1..48),
        t in 1_000_000_000i64..4_000_000_000,
    ) {
        let body = as_sent(scheme, body);
        let secret = secret_for(scheme, &key);
        let signed = sign(scheme, &body, &secret, t);
        prop_assert_eq!(check(scheme, &body, &signed, &secret, t), Reason::Ok);
        // another secret never verifies it
        let other = secret_for(scheme, &[key.clone(), vec![1]].concat());
        prop_assert_eq!(check(scheme, &body, &signed, &other, t), Reason::NoMatchingSignature);
    }

    #[test]
    fn any_changed_byte_fails(
        scheme in scheme(),
        body in proptest::collection::vec(any::<u8>(), 1..256),
        key in proptest::collection::vec(any::<u8>(), 1..48),
        t in 1_000_000_000i64..4_000_000_000,
        index in any::<usize>(),
        mask in 1u8..=255,
        delta in prop_oneof![-1_000i64..=-1, 1i64..=1_000],
    ) {
        let secret = secret_for(scheme, &key);
        let body = as_sent(scheme, body);
        let signed = sign(scheme, &body, &secret, t);

        let mut changed = body.clone();
        changed[index % body.len()] ^= mask;
        prop_assert_ne!(check(scheme, &changed, &signed, &secret, t), Reason::Ok, "body byte changed");

        let flipped = flip_mac(scheme, &signed, index);
        prop_assert_eq!(check(scheme, &body, &flipped, &secret, t), Reason::NoMatchingSignature);

        if scheme.default_tolerance_s().is_some() {
            let shifted = shift_timestamp(scheme, &signed, t, delta);
            prop_assert_eq!(check(scheme, &body, &shifted, &secret, t + delta), Reason::NoMatchingSignature);
        }
    }
}

/// The no-panic property with many cases: `scripts/fuzz.sh` (set
/// `PROPTEST_CASES`, default there 200000).
#[test]
#[ignore = "long: run with scripts/fuzz.sh"]
fn fuzz_parsers() {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(200_000);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(cases));
    let strategy = (scheme(), hostile_headers(), proptest::collection::vec(any::<u8>(), 0..64), any::<i64>());
    runner
        .run(&strategy, |(scheme, headers, body, now)| {
            never_panics(scheme, &headers, &body, "https://h:1/x?bodySHA256=00", now, 300);
            let _ = stripe::parse(&headers.first().map(|h| h.1.clone()).unwrap_or_default());
            let _ = paddle::parse(&headers.last().map(|h| h.1.clone()).unwrap_or_default());
            let _ = calendly::parse(&headers.first().map(|h| h.1.clone()).unwrap_or_default());
            let _ = twitch::parse_timestamp(&headers.last().map(|h| h.1.clone()).unwrap_or_default());
            let _ = hubspot::signed_uri(&headers.first().map(|h| h.1.clone()).unwrap_or_default());
            Ok(())
        })
        .unwrap();
}
