//! Downstream idempotency keys derived from the inbound event: the key a
//! receiver sends with its own call to a payment, shipping or e-mail API
//! (`Idempotency-Key`, `PayPal-Request-Id`, a request's `idempotency_key`
//! field), so that every retry, reclaim or replay of one event reuses one
//! key per downstream operation and the downstream service performs it
//! once. Pure Rust; `webhook_dedup.webhook_operation_key` is its SQL
//! face.
//!
//! The key of (source, idem_key, operation) is
//!
//! - **plain** when it fits `max_length`: `operation:source:idem_key`, each
//!   part percent-encoded (RFC 3986, section 2.1: every byte outside
//!   `A-Z a-z 0-9 - . _` as `%XX`, upper-case hex), so that `:` separates
//!   the parts and nothing else: two distinct triples never give one key,
//!   and the key reads back to its triple ([`decode`]);
//! - **a digest** otherwise: the first 128 bits of SHA-256 of the plain
//!   form, in 32 lower-case hex digits, after as much of the encoded
//!   operation as fits and a `-` (`refund-3f1c...`). A digest has no `:`,
//!   so it is never a plain key; two digests collide only with SHA-256
//!   (128 bits: about 2^64 keys before a collision is even likely).
//!
//! Deterministic: no clock, no randomness, nothing of the server (the same
//! key on every retry, replica, and after a dump and restore). The
//! alphabet is `A-Z a-z 0-9 - . _ % :`, which every API below accepts.

use crate::error::Error;
use crate::signature::ct::sha256;

/// A downstream API's limit on the idempotency key it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Downstream {
    /// The preset's name (`webhook_operation_key(..., downstream => ...)`).
    pub name: &'static str,
    /// Where the key goes.
    pub carrier: &'static str,
    /// Its maximum length, in characters.
    pub max_length: usize,
    /// How long the service remembers a key (a retry later than this is a
    /// new request there), as documented.
    pub retention: &'static str,
    /// Where each fact comes from.
    pub sources: &'static str,
}

/// The presets: each limit from its provider's document (Square counts
/// bytes; every key here is ASCII, so characters and bytes agree).
pub const DOWNSTREAMS: [Downstream; 6] = [
    Downstream {
        name: "stripe",
        carrier: "header Idempotency-Key",
        max_length: 255,
        retention: "at least 24 hours (a key may be pruned after that; a reuse is then a new request)",
        sources: "https://docs.stripe.com/api/idempotent_requests (\"Idempotency keys are up to 255 characters long.\" \"You can remove keys from the system automatically after they're at least 24 hours old.\")",
    },
    Downstream {
        name: "square_payments",
        carrier: "body field idempotency_key (CreatePayment)",
        max_length: 45,
        retention: "not published",
        sources: "https://github.com/square/square-python-sdk/blob/master/doc/models/create-payment-request.md (Maximum Length 45; \"the number of allowed characters might be less than the stated maximum, if multi-byte characters are used\")",
    },
    Downstream {
        name: "square_refunds",
        carrier: "body field idempotency_key (RefundPayment)",
        max_length: 45,
        retention: "not published",
        sources: "https://github.com/square/square-python-sdk/blob/master/legacy/doc/models/refund-payment-request.md (\"Keys are limited to a max of 45 characters\")",
    },
    Downstream {
        name: "square_orders",
        carrier: "body field idempotency_key (CreateOrder)",
        max_length: 192,
        retention: "not published",
        sources: "https://github.com/square/square-python-sdk/blob/master/doc/models/create-order-request.md (Maximum Length 192)",
    },
    Downstream {
        name: "paypal_orders",
        carrier: "header PayPal-Request-Id (Orders v2)",
        max_length: 108,
        retention: "6 hours (up to 72 hours on request to PayPal)",
        sources: "https://github.com/paypal/paypal-rest-api-specifications/blob/main/openapi/checkout_orders_v2.json (PayPal-Request-Id: maxLength 108; \"The server stores keys for 6 hours.\"); other PayPal APIs set their own limits and retention",
    },
    Downstream {
        name: "adyen",
        carrier: "header Idempotency-Key",
        max_length: 64,
        retention: "at least 7 days",
        sources: "https://docs.adyen.com/development-resources/api-idempotency (\"a maximum of 64 characters\"; \"valid for a minimum period of 7 days\")",
    },
];

/// The shortest `max_length`: a digest's 32 hex digits.
pub const MIN_LENGTH: usize = 32;
/// The longest part and the longest `max_length` taken.
pub const MAX_PART: usize = 255;
/// The digest's length in hex digits (128 bits).
const DIGEST_HEX: usize = 32;

/// The byte `b` is left as it is in a part.
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_')
}

/// `part` percent-encoded (see the module documentation).
fn encode(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    for &b in part.as_bytes() {
        if unreserved(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The downstream key of `operation` for the event `idem_key` of
/// `source`, at most `max_length` characters. 22023 for an empty part, a
/// part over 255 characters, or a `max_length` outside 32..=255.
pub fn operation_key(source: &str, idem_key: &str, operation: &str, max_length: usize) -> Result<String, Error> {
    for (what, part) in [("source", source), ("idem_key", idem_key), ("operation", operation)] {
        if part.is_empty() {
            return Err(Error::invalid(format!("{what} must not be empty")));
        }
        if part.chars().count() > MAX_PART {
            return Err(Error::invalid(format!("{what} must be at most {MAX_PART} characters")));
        }
    }
    if !(MIN_LENGTH..=MAX_PART).contains(&max_length) {
        return Err(Error::invalid(format!(
            "max_length must be between {MIN_LENGTH} (a digest's 32 hex digits) and {MAX_PART}"
        )));
    }
    let op = encode(operation);
    let plain = format!("{op}:{}:{}", encode(source), encode(idem_key));
    if plain.len() <= max_length {
        return Ok(plain);
    }
    let digest: String = sha256(plain.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    let digest = &digest[..DIGEST_HEX];
    // as much of the operation as fits before "-<digest>", never cutting
    // a %XX escape in two
    let room = max_length - DIGEST_HEX;
    let mut prefix = if room > 1 { &op[..op.len().min(room - 1)] } else { "" };
    if let Some(cut) = prefix.rfind('%').filter(|&i| i + 3 > prefix.len()) {
        prefix = &prefix[..cut];
    }
    Ok(if prefix.is_empty() { digest.to_string() } else { format!("{prefix}-{digest}") })
}

/// The (source, idem_key, operation) of a plain key; `None` for a digest
/// (or text that is no key).
pub fn decode(key: &str) -> Option<(String, String, String)> {
    let parts: Vec<&str> = key.split(':').collect();
    let [op, source, idem_key] = parts.as_slice() else {
        return None;
    };
    let dec = |p: &str| -> Option<String> {
        let bytes = p.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).ok()
    };
    Some((dec(source)?, dec(idem_key)?, dec(op)?))
}

/// The preset named `name`.
pub fn downstream(name: &str) -> Result<&'static Downstream, Error> {
    DOWNSTREAMS.iter().find(|d| d.name == name).ok_or_else(|| {
        let names: Vec<&str> = DOWNSTREAMS.iter().map(|d| d.name).collect();
        Error::invalid(format!("unknown downstream \"{name}\": one of {}", names.join(", ")))
    })
}

/// The `max_length` of a call of `webhook_operation_key`: `max_length`
/// itself, or the limit of the preset `downstream` when one is named. A
/// `max_length` other than the default 255 that contradicts the preset is
/// refused (22023) rather than silently replaced; so is a negative one.
pub fn limit(max_length: i32, downstream: Option<&str>) -> Result<usize, Error> {
    let given = usize::try_from(max_length).map_err(|_| {
        Error::invalid(format!("max_length must be between {MIN_LENGTH} and {MAX_PART}, not {max_length}"))
    })?;
    let Some(name) = downstream else { return Ok(given) };
    let preset = self::downstream(name)?;
    if given != MAX_PART && given != preset.max_length {
        return Err(Error::invalid(format!(
            "max_length {given} contradicts downstream \"{name}\", whose keys are at most {} characters: give one of them",
            preset.max_length
        )));
    }
    Ok(preset.max_length)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn alphabet_ok(key: &str) -> bool {
        key.bytes().all(|b| unreserved(b) || b == b'%' || b == b':')
    }

    #[test]
    fn a_plain_key_reads_as_its_parts() {
        let key = operation_key("stripe", "stripe:evt_1NG8Du2eZvKYlo2C", "refund", 255).unwrap();
        assert_eq!(key, "refund:stripe:stripe%3Aevt_1NG8Du2eZvKYlo2C");
        assert_eq!(decode(&key), Some(("stripe".into(), "stripe:evt_1NG8Du2eZvKYlo2C".into(), "refund".into())));
    }

    #[test]
    fn a_key_that_does_not_fit_is_a_digest_with_the_operation_in_front() {
        let long = "github:".to_string() + &"x".repeat(100);
        let key = operation_key("github", &long, "notify-email", 45).unwrap();
        assert_eq!(key.len(), 45);
        assert!(key.starts_with("notify-email-"), "{key}");
        assert!(!key.contains(':') && decode(&key).is_none());
        let short = operation_key("github", &long, "notify-email", 32).unwrap();
        assert_eq!(short.len(), 32, "the digest alone: {short}");
        assert!(short.bytes().all(|b| b.is_ascii_hexdigit()));
    }

    /// A truncated operation never ends in half an escape.
    #[test]
    fn the_operation_is_cut_between_escapes() {
        let key = operation_key("s", &"k".repeat(200), "a b c d", 40).unwrap();
        // room for 8 - 1 = 7 characters: "a%20b%2" would cut "%20"
        assert_eq!(key.split('-').next(), Some("a%20b"), "{key}");
    }

    /// Every preset leaves room for a digest, and a webhook_key of a long
    /// event id still fits each one.
    #[test]
    fn every_preset_takes_a_key() {
        for d in DOWNSTREAMS {
            assert!((MIN_LENGTH..=MAX_PART).contains(&d.max_length), "{}", d.name);
            assert!(d.sources.starts_with("https://"), "{}", d.name);
            let key = operation_key("stripe", &format!("stripe:evt_{}", "A".repeat(200)), "refund", d.max_length);
            assert!(key.unwrap().len() <= d.max_length, "{}", d.name);
            assert_eq!(downstream(d.name).unwrap(), &d);
        }
    }

    #[test]
    fn bad_arguments_are_refused() {
        assert!(operation_key("", "k", "op", 255).is_err());
        assert!(operation_key("s", "", "op", 255).is_err());
        assert!(operation_key("s", "k", "", 255).is_err());
        assert!(operation_key("s", "k", &"o".repeat(256), 255).is_err());
        assert!(operation_key("s", "k", "op", 31).is_err());
        assert!(operation_key("s", "k", "op", 256).is_err());
        assert!(downstream("nope").is_err());
    }

    fn part() -> impl Strategy<Value = String> {
        // few characters, the separators and escapes among them, so that
        // near-misses are common
        proptest::string::string_regex("[a:%b-]{1,6}|[a-zé]{1,3}").unwrap()
    }

    proptest! {
        /// Deterministic, within the limit and the alphabet, and
        /// injective: two distinct triples never share a key.
        #[test]
        fn keys_are_deterministic_bounded_and_distinct(
            a in (part(), part(), part()),
            b in (part(), part(), part()),
            max_length in 32usize..=60,
        ) {
            let ka = operation_key(&a.0, &a.1, &a.2, max_length).unwrap();
            let kb = operation_key(&b.0, &b.1, &b.2, max_length).unwrap();
            prop_assert_eq!(&ka, &operation_key(&a.0, &a.1, &a.2, max_length).unwrap());
            prop_assert!(ka.len() <= max_length);
            prop_assert!(alphabet_ok(&ka), "{}", ka);
            if a != b {
                prop_assert_ne!(&ka, &kb);
            }
            if let Some(parts) = decode(&ka) {
                prop_assert_eq!(parts, (a.0.clone(), a.1.clone(), a.2.clone()));
            }
        }
    }

    #[test]
    fn a_preset_sets_the_limit_and_a_contradiction_is_refused() {
        assert_eq!(limit(255, None).unwrap(), 255);
        assert_eq!(limit(40, None).unwrap(), 40);
        assert_eq!(limit(255, Some("square_payments")).unwrap(), 45);
        assert_eq!(limit(45, Some("square_payments")).unwrap(), 45);
        assert!(limit(100, Some("square_payments")).unwrap_err().to_string().contains("contradicts"));
        assert!(limit(-1, None).is_err());
        assert!(limit(255, Some("nope")).unwrap_err().to_string().contains("unknown downstream"));
        for d in DOWNSTREAMS {
            let key = operation_key("s", &"k".repeat(255), "refund", limit(255, Some(d.name)).unwrap()).unwrap();
            assert!(key.len() <= d.max_length, "{}", d.name);
        }
    }
}
