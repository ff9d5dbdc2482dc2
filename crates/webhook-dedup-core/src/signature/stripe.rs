//! Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...][,v0=<hex>]`
//! where each `v1` is HMAC-SHA256 of `"{t}.{raw body}"` under the endpoint
//! secret, the whole `whsec_...` string taken as UTF-8 bytes (it is not
//! base64-decoded, unlike Standard Webhooks).
//!
//! Source: Stripe Docs, "Verify webhook signatures manually",
//! <https://docs.stripe.com/webhooks#verify-manually>: several `v1` entries
//! appear while a secret is rolled; `v0` (test mode) and other schemes are
//! ignored; the libraries' default tolerance is 300 s. This verifier makes
//! the window symmetric (a timestamp more than the tolerance in the future
//! is rejected too), which Stripe's libraries do not.

use super::{ct, no_candidates, parse_timestamped_list, single, Delivery, Reason, TimestampedList, Verdict};

/// The signature header, lower-cased.
pub const HEADER: &str = "stripe-signature";
/// Stripe's documented default tolerance, seconds.
pub const DEFAULT_TOLERANCE_S: i64 = 300;

/// Parse the header: `,`-separated, timestamp `t`, signatures `v1`
/// (see [`parse_timestamped_list`] for the rules).
pub fn parse(value: &str) -> Result<TimestampedList<'_>, Reason> {
    parse_timestamped_list(value, ',', "t", "v1")
}

/// Verify a Stripe delivery: some `v1` must match some key, and the signed
/// timestamp must be within `tolerance_us` of `now_us` (microseconds; Unix time).
pub fn verify(delivery: Delivery<'_>, keys: &[Vec<u8>], tolerance_us: i64, now_us: i64) -> Verdict {
    check(delivery, keys, tolerance_us, now_us).unwrap_or_else(|rejected| rejected)
}

fn check(delivery: Delivery<'_>, keys: &[Vec<u8>], tolerance_us: i64, now_us: i64) -> Result<Verdict, Verdict> {
    let list = parse(single(delivery.headers, HEADER)?).map_err(Verdict::rejected)?;
    if list.signatures.is_empty() {
        return Err(no_candidates(list.other_tags, Some(list.timestamp)));
    }
    let matched = ct::first_match(keys, &list.signatures, |key| {
        ct::hmac_sha256(key, &[list.timestamp_text.as_bytes(), b".", delivery.body]).to_vec()
    });
    Ok(Verdict::timestamped(matched, list.timestamp, now_us, tolerance_us))
}

/// The headers Stripe would send for `body` under `secret` at `t`.
pub fn sign(body: &[u8], secret: &[u8], t: i64) -> Vec<(&'static str, String)> {
    let t = t.to_string();
    let mac = ct::hmac_sha256(secret, &[t.as_bytes(), b".", body]);
    vec![("Stripe-Signature", format!("t={t},v1={}", hex::encode(mac)))]
}

timed_mac_scheme!(Stripe, "stripe");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Headers;

    const SECRET: &[u8] = b"whsec_test_secret";
    const NOW: i64 = 1_700_000_000;

    fn check(body: &[u8], header: &str, now: i64) -> Verdict {
        let headers = Headers::from_pairs([("Stripe-Signature", header)]);
        verify(
            Delivery { body, headers: &headers, url: None, method: None },
            &[SECRET.to_vec()],
            DEFAULT_TOLERANCE_S * 1_000_000,
            now * 1_000_000,
        )
    }

    fn header(body: &[u8], t: i64) -> String {
        sign(body, SECRET, t).remove(0).1
    }

    #[test]
    fn sign_then_verify() {
        let v = check(b"{}", &header(b"{}", NOW), NOW + 10);
        assert_eq!((v.reason, v.secret_index, v.signed_at), (Reason::Ok, Some(0), Some(NOW)));
    }

    #[test]
    fn window_and_tampering() {
        let h = header(b"{}", NOW);
        assert_eq!(check(b"{}", &h, NOW + 301).reason, Reason::TimestampTooOld);
        assert_eq!(check(b"{}", &h, NOW - 301).reason, Reason::TimestampTooNew);
        assert_eq!(check(b"{} ", &h, NOW).reason, Reason::NoMatchingSignature);
        // the timestamp is signed: changing it breaks the signature
        let moved = h.replacen(&NOW.to_string(), &(NOW + 1).to_string(), 1);
        assert_eq!(check(b"{}", &moved, NOW).reason, Reason::NoMatchingSignature);
    }

    #[test]
    fn header_parsing_rules() {
        let sig = "5".repeat(64);
        assert_eq!(parse(&format!("t=1, v1={sig}")).unwrap().signatures.len(), 1);
        assert_eq!(parse(&format!("t=1,v1={sig},v1=zz,junk,v0={sig}")).unwrap().signatures.len(), 1);
        assert!(parse(&format!("t=1,v0={sig}")).unwrap().other_tags);
        assert_eq!(parse(&format!("t=1,t=2,v1={sig}")), Err(Reason::MalformedHeader));
        assert_eq!(parse(&format!("t=17e8,v1={sig}")), Err(Reason::MalformedHeader));
        assert_eq!(parse(&format!("v1={sig}")), Err(Reason::MalformedHeader));
        assert_eq!(parse(""), Err(Reason::MalformedHeader));
    }

    #[test]
    fn two_header_lines_are_ambiguous() {
        let h = header(b"{}", NOW);
        let headers = Headers::from_pairs([("Stripe-Signature", h.as_str()), ("stripe-signature", "t=1")]);
        let v = verify(
            Delivery { body: b"{}", headers: &headers, url: None, method: None },
            &[SECRET.to_vec()],
            300 * 1_000_000,
            NOW * 1_000_000,
        );
        assert_eq!(v.reason, Reason::MalformedHeader);
    }
}
