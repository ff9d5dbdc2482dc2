//! Standard Webhooks (and Svix, its origin): `webhook-id`,
//! `webhook-timestamp` and `webhook-signature: v1,<base64> [v1,<base64> ...]`
//! where each `v1` signature is base64 of HMAC-SHA256 of
//! `"{webhook-id}.{webhook-timestamp}.{raw body}"`, keyed with the base64
//! decoding of the secret after its optional `whsec_` prefix.
//!
//! Source: the Standard Webhooks specification,
//! <https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md>
//! (signature list space-delimited, versions `v1` symmetric and `v1a`
//! asymmetric; five-minute tolerance in the reference libraries), and Svix,
//! "Verifying webhooks manually",
//! <https://docs.svix.com/receiving/verifying-payloads/how-manual>
//! (`svix-id`, `svix-timestamp`, `svix-signature` are the same headers under
//! another prefix). Only `v1` is verified here; `v1a` (ed25519) and other
//! versions are skipped, never compared as an HMAC.

use super::{ct, no_candidates, single, timestamp_header, Delivery, Reason, Verdict};
use crate::signature::Headers;

/// The `webhook-*` header names (the specification's).
pub const HEADERS: [&str; 3] = ["webhook-id", "webhook-timestamp", "webhook-signature"];
/// The `svix-*` header names, used when no `webhook-*` header is present.
pub const SVIX_HEADERS: [&str; 3] = ["svix-id", "svix-timestamp", "svix-signature"];
/// The reference libraries' tolerance, seconds.
pub const DEFAULT_TOLERANCE_S: i64 = 300;
const SECRET_PREFIX: &str = "whsec_";

/// The key of a secret: strict base64 after an optional `whsec_`; a secret
/// that does not decode, or decodes to nothing, is a configuration error.
pub(crate) fn key(secret: &str) -> Result<Vec<u8>, &'static str> {
    let encoded = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
    match ct::decode_base64(encoded, None) {
        Some(key) if !key.is_empty() => Ok(key),
        Some(_) => Err("decodes to an empty key"),
        None => Err("is not canonical base64 after its optional whsec_ prefix"),
    }
}

/// Which header names this delivery uses: `webhook-*`, else `svix-*`.
fn names(headers: &Headers) -> [&'static str; 3] {
    if HEADERS.iter().any(|h| !headers.all(h).is_empty()) {
        HEADERS
    } else {
        SVIX_HEADERS
    }
}

/// Verify a Standard Webhooks delivery against every key.
pub fn verify(delivery: Delivery<'_>, keys: &[Vec<u8>], tolerance_us: i64, now_us: i64) -> Verdict {
    check(delivery, keys, tolerance_us, now_us).unwrap_or_else(|rejected| rejected)
}

fn check(delivery: Delivery<'_>, keys: &[Vec<u8>], tolerance_us: i64, now_us: i64) -> Result<Verdict, Verdict> {
    let [id_name, ts_name, sig_name] = names(delivery.headers);
    let id = single(delivery.headers, id_name)?.trim();
    let (ts_text, ts) = timestamp_header(delivery.headers, ts_name)?;
    let values = delivery.headers.all(sig_name);
    if values.is_empty() {
        return Err(Verdict { reason: Reason::MissingHeader, secret_index: None, signed_at: Some(ts) });
    }
    let mut candidates = Vec::new();
    let mut other_version = false;
    for entry in values.iter().flat_map(|v| v.split_ascii_whitespace()) {
        ct::check_interrupts();
        match entry.split_once(',') {
            Some(("v1", sig)) => candidates.extend(ct::decode_base64(sig, Some(32))),
            Some(_) => other_version = true,
            None => {}
        }
    }
    if candidates.is_empty() {
        return Err(no_candidates(other_version, Some(ts)));
    }
    let matched = ct::first_match(keys, &candidates, |key| {
        ct::hmac_sha256(key, &[id.as_bytes(), b".", ts_text.as_bytes(), b".", delivery.body]).to_vec()
    });
    Ok(Verdict::timestamped(matched, ts, now_us, tolerance_us))
}

/// The headers a Standard Webhooks sender would send for `body`, message
/// `id` and time `t`, with `key` already decoded from its secret.
pub fn sign(body: &[u8], key: &[u8], id: &str, t: i64) -> Vec<(&'static str, String)> {
    let t = t.to_string();
    let mac = ct::hmac_sha256(key, &[id.as_bytes(), b".", t.as_bytes(), b".", body]);
    vec![
        ("webhook-id", id.to_string()),
        ("webhook-timestamp", t),
        ("webhook-signature", format!("v1,{}", ct::encode_base64(&mac))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(body: &[u8], pairs: &[(&str, &str)], now: i64) -> Verdict {
        let headers = Headers::from_pairs(pairs.iter().copied());
        verify(
            Delivery { body, headers: &headers, url: None, method: None },
            &[vec![7; 24]],
            DEFAULT_TOLERANCE_S * 1_000_000,
            now * 1_000_000,
        )
    }

    #[test]
    fn sign_then_verify_with_either_header_prefix() {
        let signed = sign(b"{}", &[7; 24], "msg_1", 1_000);
        let pairs: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(check(b"{}", &pairs, 1_000).reason, Reason::Ok);
        let svix: Vec<(String, &str)> = pairs.iter().map(|(k, v)| (k.replace("webhook-", "svix-"), *v)).collect();
        let svix: Vec<(&str, &str)> = svix.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(check(b"{}", &svix, 1_000).reason, Reason::Ok);
        assert_eq!(check(b"{}", &pairs, 1_301).reason, Reason::TimestampTooOld);
        // the id is signed
        let other_id = [("webhook-id", "msg_2"), pairs[1], pairs[2]];
        assert_eq!(check(b"{}", &other_id, 1_000).reason, Reason::NoMatchingSignature);
        assert_eq!(check(b"{}", &pairs[1..], 1_000).reason, Reason::MissingHeader);
    }

    #[test]
    fn only_v1_counts() {
        let signed = sign(b"{}", &[7; 24], "msg_1", 1_000);
        let sig = signed[2].1.trim_start_matches("v1,").to_string();
        let v1a = format!("v1a,{sig}");
        let pairs = [("webhook-id", "msg_1"), ("webhook-timestamp", "1000"), ("webhook-signature", v1a.as_str())];
        assert_eq!(check(b"{}", &pairs, 1_000).reason, Reason::UnsupportedVersion);
        let both = format!("v1a,xyz v1,{sig}");
        let pairs = [("webhook-id", "msg_1"), ("webhook-timestamp", "1000"), ("webhook-signature", both.as_str())];
        assert_eq!(check(b"{}", &pairs, 1_000).reason, Reason::Ok);
    }
}
