//! Square: `x-square-hmacsha256-signature: <base64>` where the base64 is
//! HMAC-SHA256, under the subscription's signature key (UTF-8), of the
//! notification URL followed by the raw request body.
//!
//! Source: Square Developer docs, "Verify and validate an event
//! notification", <https://developer.squareup.com/docs/webhooks/step3validate>,
//! and the SDKs' `WebhooksHelper.isValidWebhookEventSignature`
//! (square-python-sdk `square/utilities/webhooks_helper.py`). The URL is the
//! notification URL exactly as configured in the webhook subscription
//! (scheme, host, path and query), byte for byte: behind a proxy, the public
//! URL Square called, not the one the application sees. The legacy
//! `x-square-signature` (HMAC-SHA1, Connect v1) is never consulted. Canonical
//! padded base64 only. Square signs no timestamp, so there is no replay
//! window; the event id (`event_id`) is in the signed body.

use super::scheme::{headers, mac_keys, needs_sign_url, needs_url, Check, SchemeRules};
use super::{ct, Delivery, TaggedFrame, Verdict};
use super::{Key, SignRequest, Signed};
use crate::error::Error;

/// The signature header, lower-cased.
pub const HEADER: &str = "x-square-hmacsha256-signature";
/// Shopify's frame (a bare base64 MAC) under Square's header.
pub const FRAME: TaggedFrame = TaggedFrame { header: HEADER, ..super::shopify::FRAME };

/// Verify a Square delivery sent to `url` against every key.
pub fn verify(delivery: Delivery<'_>, url: &str, keys: &[Vec<u8>]) -> Verdict {
    FRAME.header().verify(&delivery, keys, |key| ct::hmac_sha256(key, &[url.as_bytes(), delivery.body]).to_vec())
}

/// The headers Square would send for `body` to `url` under `secret`.
pub fn sign(url: &str, body: &[u8], secret: &[u8]) -> Vec<(&'static str, String)> {
    vec![("x-square-hmacsha256-signature", ct::encode_base64(&ct::hmac_sha256(secret, &[url.as_bytes(), body])))]
}

/// Scheme `square`'s registration ([`super::scheme`]).
pub struct Square;

impl SchemeRules for Square {
    const NAME: &'static str = "square";
    const SIGNS_URL: bool = true;

    fn verify(delivery: Delivery<'_>, keys: &[Key], _check: &Check<'_>) -> Result<Verdict, Error> {
        Ok(verify(delivery, needs_url(Self::NAME, &delivery)?, &mac_keys(keys)))
    }

    fn sign(body: &[u8], key: &[u8], request: &SignRequest<'_>) -> Result<Signed, Error> {
        headers(sign(needs_sign_url(request)?, body, key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Headers;
    use crate::signature::Reason;

    /// The vector of Square's SDKs (square-python-sdk
    /// `tests/utilities/test_webhooks_helper.py`); reproduce it with
    /// `printf '%s' 'https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9{"merchant_id":...}'
    ///  | openssl dgst -sha256 -hmac 'Ibxx_5AKakO-3qeNVR61Dw' -binary | base64`.
    const KEY: &[u8] = b"Ibxx_5AKakO-3qeNVR61Dw";
    const URL: &str = "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9";
    const BODY: &[u8] = br#"{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}"#;
    const SIG: &str = "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=";

    fn check(url: &str, body: &[u8], values: &[&str], keys: &[&[u8]]) -> Verdict {
        let headers = Headers::from_pairs(values.iter().map(|v| ("X-Square-HmacSha256-Signature", *v)));
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        verify(Delivery { body, headers: &headers, url: Some(url), method: None }, url, &keys)
    }

    #[test]
    fn sdk_vector() {
        assert_eq!(sign(URL, BODY, KEY), vec![("x-square-hmacsha256-signature", SIG.to_string())]);
        let v = check(URL, BODY, &[SIG], &[b"old", KEY]);
        assert_eq!((v.reason, v.secret_index, v.signed_at), (Reason::Ok, Some(1), None));
    }

    /// The SDK's negative cases: another URL, key, signature or body.
    #[test]
    fn sdk_rejections() {
        let other_url = "https://webhook.site/79a4f3a-dcfa-49ee-bac5-9d0edad886b9";
        assert_eq!(check(other_url, BODY, &[SIG], &[KEY]).reason, Reason::NoMatchingSignature);
        assert_eq!(check(URL, BODY, &[SIG], &[b"MCmhFRxGX82xMwg5FsaoQA"]).reason, Reason::NoMatchingSignature);
        // a 20-byte (SHA-1 sized) signature is the wrong length: malformed
        assert_eq!(check(URL, BODY, &["1z2n3DEJJiUPKcPzQo1ftvbxGdw="], &[KEY]).reason, Reason::MalformedHeader);
        let other_body = String::from_utf8(BODY.to_vec()).unwrap().replace("2022-07-13", "2022-06-13");
        assert_eq!(check(URL, other_body.as_bytes(), &[SIG], &[KEY]).reason, Reason::NoMatchingSignature);
        // the URL is used byte for byte: no trailing slash, no default port
        for variant in
            [format!("{URL}/"), URL.replace("webhook.site", "webhook.site:443"), URL.replace("https", "http")]
        {
            assert_eq!(check(&variant, BODY, &[SIG], &[KEY]).reason, Reason::NoMatchingSignature, "{variant}");
        }
    }

    /// Square's legacy SHA-1 header is never consulted.
    #[test]
    fn the_legacy_sha1_header_is_not_consulted() {
        let headers = Headers::from_pairs([("X-Square-Signature", SIG)]);
        let d = Delivery { body: BODY, headers: &headers, url: Some(URL), method: None };
        assert_eq!(verify(d, URL, &[KEY.to_vec()]).reason, Reason::MissingHeader);
    }
}
