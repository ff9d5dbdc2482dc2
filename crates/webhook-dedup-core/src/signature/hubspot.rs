//! HubSpot, request signature v3: `X-HubSpot-Signature-v3: <base64>` where
//! the base64 is HMAC-SHA256, under the app's client secret (UTF-8), of
//! `{method}{uri}{body}{X-HubSpot-Request-Timestamp}`: the request method
//! (`POST`), the full request URI (scheme, host, path and query) with the
//! percent-encodings listed below decoded, the raw body, and the timestamp
//! (Unix milliseconds) as sent.
//!
//! Sources: HubSpot developer docs, "Validating requests from HubSpot",
//! section "Validate the v3 request signature",
//! <https://developers.hubspot.com/docs/api/webhooks/validating-requests>
//! (the same rule for apps on the developer platform:
//! <https://developers.hubspot.com/docs/apps/developer-platform/build-apps/authentication/request-validation>),
//! and the changelog "Introducing version 3 of Webhook signatures",
//! <https://developers.hubspot.com/changelog/introducing-version-3-of-webhook-signatures>:
//! - reject the request if the timestamp is older than 5 minutes: 300 s
//!   here, symmetric and inclusive like every window (compared in
//!   milliseconds, exactly);
//! - "In the request URI, decode any of the URL-encoded characters listed in
//!   the table below": `%3A` `:`, `%2F` `/`, `%3F` `?`, `%40` `@`, `%21` `!`,
//!   `%24` `$`, `%27` `'`, `%28` `(`, `%29` `)`, `%2A` `*`, `%2C` `,`,
//!   `%3B` `;`. Nothing else is decoded ([`signed_uri`]): `%20`, `%26`,
//!   `%3D`, `%2B`, `%23` and `%25` stay as sent, and decoding is one pass,
//!   so `%253A` stays `%253A`. The table's hex digits are upper case; a
//!   lower-case `%3a` is the same octet (RFC 3986, section 2.1) and is
//!   decoded too.
//!
//! The URI must be the one HubSpot called, including `https://` and the
//! query in its original order (behind a proxy, the public URL). HubSpot's
//! SDKs (hubspot-api-python `hubspot/utils/signature.py`, hubspot-api-php
//! `lib/Utils/Signature.php`) hash the URI they are given without decoding
//! it; for a URI without any of the listed encodings the two agree.
//! The older `X-HubSpot-Signature` (v1 and v2, plain SHA-256 with the
//! secret prefixed, selected by `X-HubSpot-Signature-Version`) is never
//! consulted. Canonical padded base64 only.

use super::scheme::{headers, mac_keys, needs_sign_url, needs_url, Check, SchemeRules};
use super::{ct, single, Delivery, Reason, Verdict};
use super::{Key, SignRequest, Signed};
use crate::error::Error;

/// The signature header, lower-cased.
pub const HEADER: &str = "x-hubspot-signature-v3";
/// The signed timestamp header (Unix milliseconds), lower-cased.
pub const TIMESTAMP_HEADER: &str = "x-hubspot-request-timestamp";
/// HubSpot's documented tolerance ("older than 5 minutes"), seconds.
pub const DEFAULT_TOLERANCE_S: i64 = 300;

/// The percent-encodings HubSpot's table lists, as the byte each encodes.
const DECODED: [u8; 12] = [b':', b'/', b'?', b'@', b'!', b'$', b'\'', b'(', b')', b'*', b',', b';'];

/// The request URI as HubSpot signs it: each percent-encoding of a byte in
/// HubSpot's table replaced by that byte (hex digits in either case), in one
/// pass from left to right; every other byte, and every other
/// percent-encoding, as given.
pub fn signed_uri(uri: &str) -> String {
    let bytes = uri.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let (mut i, mut steps) = (0, 0u32);
    while i < bytes.len() {
        if steps % (1 << 20) == 0 {
            ct::check_interrupts(); // a caller chooses the URI's length
        }
        steps = steps.wrapping_add(1);
        if bytes[i] == b'%' {
            let decoded = match bytes.get(i + 1..i + 3) {
                Some(&[hi, lo]) => hex_digit(hi).zip(hex_digit(lo)).map(|(hi, lo)| hi << 4 | lo),
                _ => None,
            }
            .filter(|b| DECODED.contains(b));
            if let Some(b) = decoded {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    // Only ASCII triples were replaced by ASCII bytes: still UTF-8.
    String::from_utf8(out).expect("replacing ASCII with ASCII keeps UTF-8")
}

fn hex_digit(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Parse the timestamp: ASCII digits only, no sign, at most 15 digits (Unix
/// milliseconds up to year 33658); `None` otherwise.
pub fn parse_unix_milliseconds(text: &str) -> Option<i64> {
    if text.is_empty() || text.len() > 15 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn mac(key: &[u8], method: &str, signed_uri: &str, body: &[u8], timestamp: &str) -> [u8; 32] {
    ct::hmac_sha256(key, &[method.as_bytes(), signed_uri.as_bytes(), body, timestamp.as_bytes()])
}

/// Verify a HubSpot request (`method` to `uri`) against every key, within
/// `tolerance_us` of `now_us` (microseconds; Unix time).
pub fn verify(
    delivery: Delivery<'_>,
    method: &str,
    uri: &str,
    keys: &[Vec<u8>],
    tolerance_us: i64,
    now_us: i64,
) -> Verdict {
    let check = || -> Result<Verdict, Verdict> {
        let ts_text = single(delivery.headers, TIMESTAMP_HEADER)?.trim();
        let ts_ms = parse_unix_milliseconds(ts_text).ok_or(Verdict::rejected(Reason::MalformedHeader))?;
        let signed_at = Some(ts_ms.div_euclid(1_000));
        let value = super::signature_header(delivery.headers, HEADER, signed_at)?;
        let candidates: Vec<Vec<u8>> = ct::decode_base64(value.trim(), Some(32)).into_iter().collect();
        if candidates.is_empty() {
            return Err(Verdict { reason: Reason::MalformedHeader, secret_index: None, signed_at });
        }
        let uri = signed_uri(uri);
        let matched = ct::first_match(keys, &candidates, |key| mac(key, method, &uri, delivery.body, ts_text).to_vec());
        Ok(Verdict::timestamped_ns(matched, i128::from(ts_ms) * 1_000_000, now_us, tolerance_us))
    };
    check().unwrap_or_else(|rejected| rejected)
}

/// The headers HubSpot would send for `body`, sent with `method` to `uri`,
/// under `secret` at `t_ms` (Unix milliseconds).
pub fn sign(method: &str, uri: &str, body: &[u8], secret: &[u8], t_ms: i64) -> Vec<(&'static str, String)> {
    let t = t_ms.to_string();
    let signature = ct::encode_base64(&mac(secret, method, &signed_uri(uri), body, &t));
    vec![("X-HubSpot-Request-Timestamp", t), ("X-HubSpot-Signature-v3", signature)]
}

/// Scheme `hubspot`'s registration ([`super::scheme`]).
pub struct Hubspot;

impl SchemeRules for Hubspot {
    const NAME: &'static str = "hubspot";
    const DEFAULT_TOLERANCE_S: Option<i64> = Some(DEFAULT_TOLERANCE_S);
    const SIGNS_URL: bool = true;

    fn verify(delivery: Delivery<'_>, keys: &[Key], check: &Check<'_>) -> Result<Verdict, Error> {
        let url = needs_url(Self::NAME, &delivery)?;
        let method = needs_method(delivery.method)?;
        Ok(verify(delivery, method, url, &mac_keys(keys), check.tolerance_us, check.now_us))
    }

    fn sign(body: &[u8], key: &[u8], request: &SignRequest<'_>) -> Result<Signed, Error> {
        let url = needs_sign_url(request)?;
        headers(sign(needs_method(request.method)?, url, body, key, request.unix_us.div_euclid(1_000)))
    }
}

/// The request method HubSpot signs, or the 22023 for its absence.
fn needs_method(method: Option<&str>) -> Result<&str, Error> {
    method
        .filter(|m| !m.is_empty())
        .ok_or_else(|| Error::invalid("scheme hubspot needs the request method (argument method)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Headers;

    /// The v3 vector of HubSpot's Python SDK (hubspot-api-python
    /// `tests/spec/utils/test_signature.py`, `test_get_signature__v3`), with
    /// the client secret of HubSpot's documented v1/v2 examples:
    /// `printf '%s' "POSThttps://www.example.com/webhook_uri{'example_field':'example_value'}15000000"
    ///  | openssl dgst -sha256 -hmac yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy -binary | base64`.
    const SECRET: &[u8] = b"yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy";
    const URI: &str = "https://www.example.com/webhook_uri";
    const BODY: &[u8] = b"{'example_field':'example_value'}";
    const TS: &str = "15000000";
    const SIG: &str = "HPW73RUtKmcYoEDADG0s6MmGFWUzWJKAW07r8RDgcQw=";
    const NOW_MS: i64 = 15_000_000;

    fn check(method: &str, uri: &str, body: &[u8], headers: &[(&str, &str)], keys: &[&[u8]], now_ms: i64) -> Verdict {
        let headers = Headers::from_pairs(headers.iter().copied());
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        let d = Delivery { body, headers: &headers, url: Some(uri), method: Some(method) };
        verify(d, method, uri, &keys, DEFAULT_TOLERANCE_S * 1_000_000, now_ms * 1_000)
    }

    fn signed(ts: &str, sig: &str) -> [(&'static str, String); 2] {
        [("X-HubSpot-Request-Timestamp", ts.to_string()), ("X-HubSpot-Signature-v3", sig.to_string())]
    }

    fn pairs<'a>(h: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
        h.iter().map(|(k, v)| (*k, v.as_str())).collect()
    }

    #[test]
    fn sdk_vector() {
        assert_eq!(sign("POST", URI, BODY, SECRET, NOW_MS), signed(TS, SIG).to_vec());
        let v = check("POST", URI, BODY, &pairs(&signed(TS, SIG)), &[b"old", SECRET], NOW_MS + 10);
        assert_eq!((v.reason, v.secret_index, v.signed_at), (Reason::Ok, Some(1), Some(15_000)));
    }

    /// Our vector for the URI rule: the listed encodings are decoded before
    /// signing, `%20` and `%25` are not, and decoding is one pass.
    /// `printf '%s' 'POSThttps://www.example.com/webhook_uri?email=user@example.com&q=a,b%20c&r=%253A[{"eventId":1,...}]1700000000000'
    ///  | openssl dgst -sha256 -hmac yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy -binary | base64`.
    #[test]
    fn own_vector_decodes_the_listed_characters_only() {
        let raw = "https://www.example.com/webhook_uri?email=user%40example.com&q=a%2Cb%20c&r=%253A";
        let uri = "https://www.example.com/webhook_uri?email=user@example.com&q=a,b%20c&r=%253A";
        assert_eq!(signed_uri(raw), uri);
        let body = br#"[{"eventId":1,"subscriptionId":12345,"portalId":62515,"occurredAt":1700000000000,"subscriptionType":"contact.creation","attemptNumber":0,"objectId":123,"changeSource":"CRM","appId":54321}]"#;
        let sig = "hRqVGkkabr8GwW46Aj7Il10FHPmeHeBaRKpaUKeyZ0w=";
        let h = signed("1700000000000", sig);
        assert_eq!(sign("POST", raw, body, SECRET, 1_700_000_000_000), h.to_vec());
        assert_eq!(sign("POST", uri, body, SECRET, 1_700_000_000_000), h.to_vec());
        for received in [raw, uri, &raw.replace("%2C", "%2c")] {
            assert!(check("POST", received, body, &pairs(&h), &[SECRET], 1_700_000_000_000).valid(), "{received}");
        }
        // %20 is not in the table: decoding it changes the signed URI
        let spaced = uri.replace("%20", " ");
        assert_eq!(
            check("POST", &spaced, body, &pairs(&h), &[SECRET], 1_700_000_000_000).reason,
            Reason::NoMatchingSignature
        );
    }

    #[test]
    fn every_listed_encoding_and_nothing_else() {
        for (enc, dec) in [
            ("%3A", ":"),
            ("%2F", "/"),
            ("%3F", "?"),
            ("%40", "@"),
            ("%21", "!"),
            ("%24", "$"),
            ("%27", "'"),
            ("%28", "("),
            ("%29", ")"),
            ("%2A", "*"),
            ("%2C", ","),
            ("%3B", ";"),
        ] {
            assert_eq!(signed_uri(&format!("x{enc}y")), format!("x{dec}y"));
            assert_eq!(signed_uri(&format!("x{}y", enc.to_lowercase())), format!("x{dec}y"), "RFC 3986: same octet");
        }
        for kept in ["%20", "%26", "%3D", "%2B", "%23", "%25", "%41", "%", "%3", "%G1", "%+A", "%%3A", "%E2%82%AC"] {
            let expected = if kept == "%%3A" { "%:".to_string() } else { kept.to_string() };
            assert_eq!(signed_uri(kept), expected, "{kept}");
        }
        assert_eq!(signed_uri("%253A%3A"), "%253A:", "one pass");
        assert_eq!(signed_uri("/é%3Aé"), "/é:é", "UTF-8 around an encoding");
        assert_eq!(signed_uri(""), "");
    }

    #[test]
    fn window_is_symmetric_inclusive_and_exact_to_the_millisecond() {
        let h = signed(TS, SIG);
        let at = |now_ms| check("POST", URI, BODY, &pairs(&h), &[SECRET], now_ms).reason;
        assert_eq!(at(NOW_MS + 300_000), Reason::Ok);
        assert_eq!(at(NOW_MS - 300_000), Reason::Ok);
        assert_eq!(at(NOW_MS + 300_001), Reason::TimestampTooOld);
        assert_eq!(at(NOW_MS - 300_001), Reason::TimestampTooNew);
    }

    #[test]
    fn rejections_have_reasons() {
        let h = signed(TS, SIG);
        let reason = |method: &str, uri: &str, body: &[u8], headers: &[(&str, &str)]| {
            check(method, uri, body, headers, &[SECRET], NOW_MS).reason
        };
        assert_eq!(reason("POST", URI, b"{}", &pairs(&h)), Reason::NoMatchingSignature);
        assert_eq!(reason("GET", URI, BODY, &pairs(&h)), Reason::NoMatchingSignature, "the method is signed");
        assert_eq!(reason("post", URI, BODY, &pairs(&h)), Reason::NoMatchingSignature, "as received");
        assert_eq!(reason("POST", "http://www.example.com/webhook_uri", BODY, &pairs(&h)), Reason::NoMatchingSignature);
        assert_eq!(reason("POST", URI, BODY, &pairs(&h[..1])), Reason::MissingHeader);
        assert_eq!(reason("POST", URI, BODY, &pairs(&h[1..])), Reason::MissingHeader);
        // the timestamp is signed: moving it breaks the signature
        assert_eq!(reason("POST", URI, BODY, &pairs(&signed("15000001", SIG))), Reason::NoMatchingSignature);
        for bad in ["1.5e7", "-15000000", "+15000000", "15000000.0", "1500000000000000", ""] {
            assert_eq!(reason("POST", URI, BODY, &pairs(&signed(bad, SIG))), Reason::MalformedHeader, "{bad:?}");
        }
        assert_eq!(reason("POST", URI, BODY, &pairs(&signed(TS, &SIG[..40]))), Reason::MalformedHeader);
        assert_eq!(
            reason("POST", URI, BODY, &pairs(&signed(TS, SIG.trim_end_matches('=')))),
            Reason::MalformedHeader,
            "unpadded"
        );
        let twice =
            [("X-HubSpot-Request-Timestamp", TS), ("x-hubspot-request-timestamp", TS), ("X-HubSpot-Signature-v3", SIG)];
        assert_eq!(reason("POST", URI, BODY, &twice), Reason::MalformedHeader);
        // the v1/v2 header is not consulted
        let v2 = [("X-HubSpot-Request-Timestamp", TS), ("X-HubSpot-Signature", SIG)];
        assert_eq!(reason("POST", URI, BODY, &v2), Reason::MissingHeader);
    }
}
