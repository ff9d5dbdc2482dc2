//! Twilio: `X-Twilio-Signature: <base64>` where the base64 is HMAC-SHA1,
//! under the account's auth token (UTF-8), of
//! - for form bodies (`application/x-www-form-urlencoded`): the full request
//!   URL followed by every POST parameter, sorted by name, as `name` then
//!   `value` with no delimiters;
//! - for JSON bodies: the full URL alone, which then carries a
//!   `bodySHA256=<hex SHA-256 of the raw body>` query parameter that must
//!   match the body.
//!
//! Sources: Twilio Docs, "Webhooks security",
//! <https://www.twilio.com/docs/usage/webhooks/webhooks-security>, and the
//! reference validator, twilio-python `twilio/request_validator.py`
//! (`RequestValidator.validate`): the URL is tried as given with its port
//! removed and with the scheme's default port added (Twilio's signing is
//! inconsistent about ports), parameter names are sorted and deduplicated,
//! and each name's distinct values are appended sorted.
//!
//! The URL is used byte for byte (no normalisation, which would change what
//! was signed); only its port is added or removed.

use super::scheme::{headers, mac_keys, needs_sign_url, needs_url, Check, SchemeRules};
use super::Coverage;
use super::{ct, untimed, Algorithm, Delivery, Reason, Verdict};
use super::{Key, SignRequest, Signed};
use crate::error::Error;
use std::collections::BTreeMap;

/// The signature header, lower-cased.
pub const HEADER: &str = "x-twilio-signature";
const BODY_HASH_PARAM: &str = "bodySHA256";

/// Split `url` into (before the port, the port with its colon, the rest):
/// `https://user@host:8443/p?q` gives (`https://user@host`, `:8443`, `/p?q`).
/// `None` when the URL has no `scheme://authority`.
fn split_port(url: &str) -> Option<(&str, &str, &str)> {
    let authority_start = url.find("://")? + 3;
    let rest = &url[authority_start..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_len];
    let host_start = authority.rfind('@').map_or(0, |at| at + 1);
    let host_port = &authority[host_start..];
    // An IPv6 literal is bracketed; a port can only follow the bracket.
    let search_from = host_port.rfind(']').map_or(0, |b| b + 1);
    let port_len = match host_port[search_from..].rfind(':') {
        Some(colon) => host_port.len() - (search_from + colon),
        None => 0,
    };
    let port_start = authority_start + authority_len - port_len;
    Some((
        &url[..port_start],
        &url[port_start..authority_start + authority_len],
        &url[authority_start + authority_len..],
    ))
}

/// The URLs to try: as given without its port, and with the scheme's default
/// port (443 for https, else 80) when it has none, as twilio-python does.
pub fn url_variants(url: &str) -> Vec<String> {
    let Some((head, port, tail)) = split_port(url) else {
        return vec![url.to_string()];
    };
    let without = format!("{head}{tail}");
    let with = if port.is_empty() {
        let default = if head.get(..8).is_some_and(|s| s.eq_ignore_ascii_case("https://")) { 443 } else { 80 };
        format!("{head}:{default}{tail}")
    } else {
        url.to_string()
    };
    if without == with {
        vec![without]
    } else {
        vec![without, with]
    }
}

/// Form parameters a request may carry: Twilio's requests carry a few
/// dozen; a body of a million `a&a&...` would need about forty times its
/// size in Rust's heap to sort.
pub const MAX_FORM_PARAMETERS: usize = 10_000;

/// The form parameters of `body` in signing order: names sorted and
/// distinct, each name's distinct values sorted, concatenated.
/// `None` past `limit` parameters.
fn form_suffix(body: &[u8], limit: usize) -> Option<Vec<u8>> {
    let mut params: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (n, (name, value)) in form_urlencoded::parse(body).enumerate() {
        ct::check_interrupts();
        if n >= limit {
            return None;
        }
        params.entry(name.into_owned()).or_default().push(value.into_owned());
    }
    let mut out = Vec::new();
    for (name, mut values) in params {
        ct::check_interrupts();
        values.sort();
        values.dedup();
        for value in values {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(value.as_bytes());
        }
    }
    Some(out)
}

/// Verify a Twilio request to `url` against every key (auth token).
pub fn verify(delivery: Delivery<'_>, url: &str, keys: &[Vec<u8>]) -> Verdict {
    let value = match super::signature_header(delivery.headers, HEADER, None) {
        Ok(value) => value,
        Err(rejected) => return rejected,
    };
    let candidates: Vec<Vec<u8>> = ct::decode_base64(value.trim(), Some(20)).into_iter().collect();
    if candidates.is_empty() {
        return Verdict::rejected(Reason::MalformedHeader);
    }
    // A JSON body is covered by the URL's bodySHA256; a form body by its parameters.
    let suffix = match super::query_parameter(url, BODY_HASH_PARAM) {
        Some(hash) => {
            let body_hash = ct::sha256(delivery.body);
            let presented = ct::decode_hex(&hash, 32);
            if !presented.is_some_and(|p| ct::equal(&body_hash, &p)) {
                return Verdict::rejected(Reason::NoMatchingSignature);
            }
            Vec::new()
        }
        None => match form_suffix(delivery.body, MAX_FORM_PARAMETERS) {
            Some(suffix) => suffix,
            // not a request Twilio sends; parsing it would cost tens of
            // times its size in memory PostgreSQL does not account for
            None => return Verdict::rejected(Reason::NoMatchingSignature),
        },
    };
    url_variants(url)
        .iter()
        .map(|variant| untimed(keys, &candidates, |key| ct::hmac(Algorithm::Sha1, key, &[variant.as_bytes(), &suffix])))
        .find(Verdict::valid)
        .unwrap_or(Verdict::rejected(Reason::NoMatchingSignature))
}

/// What the MAC of a request to `url` with `body` covers, in one canonical
/// form: the URL without its port (Twilio signs with or without it, see
/// [`url_variants`]), then for a form body its parameters in signing order
/// ([`form_suffix`]), for a JSON body (the URL carries `bodySHA256`)
/// nothing more. Two requests with the same signed text are the same
/// request to Twilio's signature, however their form pairs are ordered,
/// encoded (`%20` or `+`) or repeated: the replay guard keys Twilio's
/// deliveries on this, not on the raw bytes. `None` past
/// [`MAX_FORM_PARAMETERS`] (such a request does not verify).
pub fn signed_text(url: &str, body: &[u8]) -> Option<Vec<u8>> {
    let mut text = url_variants(url).swap_remove(0).into_bytes();
    if super::query_parameter(url, BODY_HASH_PARAM).is_none() {
        text.extend(form_suffix(body, MAX_FORM_PARAMETERS)?);
    }
    Some(text)
}

/// The headers Twilio would send for a request to `url` with `body` (form
/// parameters, or a JSON body when `url` carries `bodySHA256`).
pub fn sign(url: &str, body: &[u8], secret: &[u8]) -> Vec<(&'static str, String)> {
    let suffix = if super::query_parameter(url, BODY_HASH_PARAM).is_some() {
        Vec::new()
    } else {
        form_suffix(body, usize::MAX).unwrap_or_default()
    };
    let mac = ct::hmac(Algorithm::Sha1, secret, &[url.as_bytes(), &suffix]);
    vec![("X-Twilio-Signature", ct::encode_base64(&mac))]
}

/// Scheme `twilio`'s registration ([`super::scheme`]).
pub struct Twilio;

impl SchemeRules for Twilio {
    const NAME: &'static str = "twilio";
    const SIGNS_URL: bool = true;
    // The sorted form parameters (or, for JSON, the URL carrying the
    // body's SHA-256) are signed: the content, not its bytes.
    const COVERAGE: Coverage = Coverage::Content;

    fn signed_content(body: &[u8], url: Option<&str>) -> Option<Vec<u8>> {
        signed_text(url?, body)
    }

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
    use sha2::{Digest, Sha256};

    /// Twilio's published example (Webhooks security): auth token 12345.
    const URL: &str = "https://mycompany.com/myapp.php?foo=1&bar=2";
    const BODY: &[u8] =
        b"CallSid=CA1234567890ABCDE&Caller=%2B12349013030&Digits=1234&From=%2B12349013030&To=%2B18005551212";
    const SIGNATURE: &str = "0/KCTR6DLpKmkAf8muzZqo1nDgQ=";

    fn check(url: &str, body: &[u8], signature: &str) -> Reason {
        let headers = Headers::from_pairs([("X-Twilio-Signature", signature)]);
        verify(Delivery { body, headers: &headers, url: Some(url), method: None }, url, &[b"12345".to_vec()]).reason
    }

    #[test]
    fn documented_example() {
        assert_eq!(sign(URL, BODY, b"12345")[0].1, SIGNATURE);
        assert_eq!(check(URL, BODY, SIGNATURE), Reason::Ok);
        // parameter order in the body does not matter; values do
        let reordered =
            b"To=%2B18005551212&CallSid=CA1234567890ABCDE&Caller=%2B12349013030&Digits=1234&From=%2B12349013030";
        assert_eq!(check(URL, reordered, SIGNATURE), Reason::Ok);
        assert_eq!(check(URL, &BODY[..BODY.len() - 1], SIGNATURE), Reason::NoMatchingSignature);
        assert_eq!(check("https://mycompany.com/myapp.php?foo=1&bar=3", BODY, SIGNATURE), Reason::NoMatchingSignature);
    }

    #[test]
    fn ports_are_tried_both_ways() {
        // signed without a port, received with the default port, and back
        let with_port = "https://mycompany.com:443/myapp.php?foo=1&bar=2";
        assert_eq!(check(with_port, BODY, SIGNATURE), Reason::Ok);
        let signed_with_port = sign(with_port, BODY, b"12345").remove(0).1;
        assert_eq!(check(URL, BODY, &signed_with_port), Reason::Ok);
        assert_eq!(url_variants("http://[::1]:8080/x?y=1"), ["http://[::1]/x?y=1", "http://[::1]:8080/x?y=1"]);
        assert_eq!(url_variants("https://u:p@h/x"), ["https://u:p@h/x", "https://u:p@h:443/x"]);
        assert_eq!(url_variants("not a url"), ["not a url"]);
    }

    /// A form body of many tiny parameters is refused before it is sorted
    /// (it would take tens of times its size in memory).
    #[test]
    fn too_many_form_parameters_are_refused() {
        let url = "https://example.com/hook";
        for (n, expected) in [(MAX_FORM_PARAMETERS, Reason::Ok), (MAX_FORM_PARAMETERS + 1, Reason::NoMatchingSignature)]
        {
            let body = vec!["a=1"; n].join("&");
            let signed = sign(url, body.as_bytes(), b"12345");
            assert_eq!(check(url, body.as_bytes(), &signed[0].1), expected, "{n} parameters");
        }
    }

    /// Reordered, re-encoded or repeated form pairs verify under the same
    /// signature, so they are one signed text; other values are not.
    #[test]
    fn the_signed_text_is_canonical() {
        let canonical = signed_text(URL, BODY).unwrap();
        assert!(canonical.starts_with(b"https://mycompany.com/myapp.php?foo=1&bar=2CallSid"));
        for same in [
            &b"To=%2B18005551212&CallSid=CA1234567890ABCDE&Caller=%2B12349013030&Digits=1234&From=%2B12349013030"[..],
            b"CallSid=CA1234567890ABCDE&Caller=%2B12349013030&Digits=1234&Digits=1234&From=%2B12349013030&To=%2B18005551212",
            b"CallSid=CA1234567890ABCDE&&Caller=%2B12349013030&Digits=1234&From=%2B12349013030&To=%2B18005551212",
        ] {
            assert_eq!(check(URL, same, SIGNATURE), Reason::Ok, "{}", String::from_utf8_lossy(same));
            assert_eq!(signed_text(URL, same).unwrap(), canonical);
        }
        assert_eq!(signed_text("https://mycompany.com:443/myapp.php?foo=1&bar=2", BODY).unwrap(), canonical);
        assert_ne!(signed_text(URL, &BODY[..BODY.len() - 1]).unwrap(), canonical);
        let json_url = "https://example.com/hook?bodySHA256=00";
        assert_eq!(signed_text(json_url, b"{}").unwrap(), json_url.as_bytes());
    }

    #[test]
    fn json_bodies_are_covered_by_body_sha256() {
        let body = br#"{"event":"call.completed"}"#;
        let url = format!("https://example.com/hook?bodySHA256={}", hex::encode(Sha256::digest(body)));
        let signature = sign(&url, body, b"12345").remove(0).1;
        assert_eq!(check(&url, body, &signature), Reason::Ok);
        assert_eq!(check(&url, br#"{"event":"call.failed"}"#, &signature), Reason::NoMatchingSignature);
    }
}
