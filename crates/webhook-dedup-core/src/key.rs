//! Scoped, bounded idempotency keys.
//!
//! `webhook_key(source, event_id, environment, account, operation)` builds
//! a key that is
//! - **scoped**: the source (and optionally environment, account and
//!   operation) is part of the key, so `evt_1` from two providers or two
//!   accounts never collide;
//! - **injective**: every part is escaped (`%` → `%25`, `:` → `%3A`) before
//!   the parts are joined with `:`, so `("ab","c")` and `("a","bc")` differ;
//!   with no optional part the key has 2 fields (`source:event_id`),
//!   otherwise exactly 5 (`source:environment:account:event_id:operation`,
//!   an absent optional part being an empty field), so the field count says
//!   which form it is. Empty parts are rejected, so an empty field can only
//!   mean NULL;
//! - **bounded**: at most [`MAX_KEY_CHARS`] characters. A longer readable
//!   form keeps its first 189 characters and replaces the rest with `%h`
//!   and the 64 hex digits of SHA-256 over the whole readable form. `%h`
//!   never occurs in a readable key (every `%` there starts `%25` or `%3A`),
//!   so a hashed key never equals a readable one;
//! - **case-sensitive and unnormalized**: ids are compared byte for byte.
//!
//! `webhook_body_key` puts `%b` and the 64 hex digits of SHA-256 over the
//! raw body where the event id goes: `%b` never occurs in an escaped id, so
//! a body key never equals an id key. It is the fallback for providers
//! that send no event id, and it is wrong when two distinct events have
//! byte-identical bodies (they become one key: the second is a
//! `duplicate`), and when a provider re-serialises a retry (the retry
//! becomes a new key).

use crate::error::Error;
use sha2::{Digest, Sha256};

/// The longest key, in characters. Stripe documents idempotency keys of
/// up to 255 characters (<https://docs.stripe.com/api/idempotent_requests>).
pub const MAX_KEY_CHARS: usize = 255;
const HASH_MARK: &str = "%h";
const HASH_HEX_CHARS: usize = 64;

/// The parts of a key. `source` and `event_id` are required.
#[derive(Debug, Clone, Copy, Default)]
pub struct Parts<'a> {
    pub source: &'a str,
    pub event_id: &'a str,
    pub environment: Option<&'a str>,
    pub account: Option<&'a str>,
    pub operation: Option<&'a str>,
    /// `event_id` is a body key's `%b<hex>` field, written unescaped.
    pub body_hash: bool,
}

/// The event-id field of `webhook_body_key`: `%b` and the hex SHA-256 of
/// the raw body.
pub fn body_hash_field(payload: &[u8]) -> String {
    format!("%b{}", hex::encode(crate::signature::ct::sha256(payload)))
}

/// Derive the key for `parts`. Empty parts are 22023.
pub fn derive(parts: &Parts<'_>) -> Result<String, Error> {
    let check = |name: &str, value: &str| {
        if value.is_empty() {
            Err(Error::invalid(format!("{name} must not be empty")))
        } else {
            Ok(())
        }
    };
    check("source", parts.source)?;
    check("event_id", parts.event_id)?;
    for (name, part) in [("environment", parts.environment), ("account", parts.account), ("operation", parts.operation)]
    {
        if let Some(value) = part {
            check(name, value)?;
        }
    }

    let mut readable = String::with_capacity(parts.source.len() + parts.event_id.len() + 8);
    let push_part = |out: &mut String, value: &str, is_event_id: bool| {
        if is_event_id && parts.body_hash {
            out.push_str(value);
        } else {
            push_escaped(out, value);
        }
    };
    if parts.environment.is_none() && parts.account.is_none() && parts.operation.is_none() {
        push_escaped(&mut readable, parts.source);
        readable.push(':');
        push_part(&mut readable, parts.event_id, true);
    } else {
        let fields = [Some(parts.source), parts.environment, parts.account, Some(parts.event_id), parts.operation];
        for (i, field) in fields.iter().enumerate() {
            if i > 0 {
                readable.push(':');
            }
            if let Some(value) = field {
                push_part(&mut readable, value, i == 3);
            }
        }
    }
    Ok(bound(readable))
}

/// One part as it appears as a field of a key (`%` → `%25`, `:` → `%3A`):
/// what `webhook_dedup.redact(account => ...)` looks for in the account
/// field.
pub fn escape_part(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    push_escaped(&mut out, part);
    out
}

fn push_escaped(out: &mut String, part: &str) {
    for c in part.chars() {
        match c {
            '%' => out.push_str("%25"),
            ':' => out.push_str("%3A"),
            c => out.push(c),
        }
    }
}

/// Replace the tail of an over-long readable key by its hash.
fn bound(readable: String) -> String {
    if readable.chars().count() <= MAX_KEY_CHARS {
        return readable;
    }
    let keep = MAX_KEY_CHARS - HASH_MARK.len() - HASH_HEX_CHARS;
    let mut key: String = readable.chars().take(keep).collect();
    key.push_str(HASH_MARK);
    key.push_str(&hex::encode(Sha256::digest(readable.as_bytes())));
    key
}

/// The source name the metrics report counts under when a database's share
/// of the counters is used up (`crate::metrics::OVERFLOW_SOURCE`): reserved,
/// so that no real source's counts are summed into that row.
pub const RESERVED_SOURCE: &str = "(overflow)";

/// Check a source given to the functions: [`check_bounded`], and not the
/// reserved [`RESERVED_SOURCE`] (22023).
pub fn check_source(value: &str) -> Result<(), Error> {
    check_bounded("source", value)?;
    if value == RESERVED_SOURCE {
        return Err(Error::invalid(format!(
            "source \"{RESERVED_SOURCE}\" is reserved: the metrics report the counts of sources past a database's share under it"
        )));
    }
    Ok(())
}

/// Check a key or source given to the claim functions: non-empty and at
/// most [`MAX_KEY_CHARS`] characters (characters, not bytes, as Stripe
/// counts them). Errors are 22023 naming the argument.
pub fn check_bounded(what: &str, value: &str) -> Result<(), Error> {
    if value.is_empty() {
        return Err(Error::invalid(format!("{what} must not be empty")));
    }
    let chars = value.chars().count();
    if chars > MAX_KEY_CHARS {
        return Err(Error::invalid_with_hint(
            format!("{what} is {chars} characters long; the limit is {MAX_KEY_CHARS}"),
            "Derive keys with webhook_dedup.webhook_key(), which bounds them.",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(source: &str, event_id: &str) -> String {
        derive(&Parts { source, event_id, ..Parts::default() }).unwrap()
    }

    #[test]
    fn an_account_is_found_as_the_third_field() {
        let key = derive(&Parts { source: "s", event_id: "e", account: Some("a:b%c"), ..Parts::default() }).unwrap();
        assert_eq!(key.split(':').nth(2), Some(escape_part("a:b%c").as_str()));
        assert_eq!(escape_part("a:b%c"), "a%3Ab%25c");
    }

    #[test]
    fn readable_forms() {
        assert_eq!(
            key("github", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
            "github:72d3162e-cc78-11e3-81ab-4c9367dc0958"
        );
        let full = derive(&Parts {
            source: "stripe",
            event_id: "evt_456",
            environment: Some("live"),
            account: Some("acct_123"),
            operation: Some("fulfillment"),
            body_hash: false,
        })
        .unwrap();
        assert_eq!(full, "stripe:live:acct_123:evt_456:fulfillment");
        let partial =
            derive(&Parts { source: "stripe", event_id: "evt_456", account: Some("acct_123"), ..Parts::default() })
                .unwrap();
        assert_eq!(partial, "stripe::acct_123:evt_456:");
    }

    #[test]
    fn delimiters_in_parts_cannot_collide() {
        assert_ne!(key("ab", "c"), key("a", "bc"));
        assert_ne!(key("a:b", "c"), key("a", "b:c"));
        assert_eq!(key("a:b", "c%"), "a%3Ab:c%25");
        // a literal "%3A" in an id is escaped, so it differs from an escaped ':'
        assert_ne!(key("a", "%3A"), key("a", ":"));
        // the 2-field form never equals a 5-field form
        let five = derive(&Parts { source: "a", event_id: "b", operation: Some("c"), ..Parts::default() }).unwrap();
        assert_ne!(five, key("a", "b:c"));
    }

    #[test]
    fn empty_parts_are_rejected() {
        assert!(derive(&Parts { source: "", event_id: "x", ..Parts::default() }).is_err());
        assert!(derive(&Parts { source: "s", event_id: "", ..Parts::default() }).is_err());
        assert!(derive(&Parts { source: "s", event_id: "x", account: Some(""), ..Parts::default() }).is_err());
    }

    #[test]
    fn long_keys_are_hashed_and_bounded() {
        let long = "é".repeat(300);
        let k = key("src", &long);
        assert_eq!(k.chars().count(), MAX_KEY_CHARS);
        assert!(k.contains(HASH_MARK));
        assert_eq!(k, key("src", &long), "deterministic");
        // same 189-character prefix, different tails: different keys
        let other = format!("{}x", &long[..long.len() - 2]);
        assert_ne!(key("src", &other), k);
        // exactly 255 readable characters stay readable
        let fits = "k".repeat(MAX_KEY_CHARS - 4);
        assert_eq!(key("src", &fits).chars().count(), MAX_KEY_CHARS);
        assert!(!key("src", &fits).contains(HASH_MARK));
    }

    #[test]
    fn bounded_check_counts_characters() {
        assert!(check_bounded("idem_key", &"é".repeat(255)).is_ok());
        let err = check_bounded("idem_key", &"k".repeat(256)).unwrap_err();
        assert_eq!(err.to_string(), "idem_key is 256 characters long; the limit is 255");
        assert!(check_bounded("idem_key", "").is_err());
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Parts built from characters that stress the escaping: the separator,
    /// the escape character, the hex digits of the escapes and the marks.
    fn part() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            "[:%3A25hbx]{1,6}",
            "[:%3A25hbxé]{1,40}",
            any::<String>().prop_filter("non-empty", |s| !s.is_empty()),
            "[a-z]{200,300}",
        ]
    }

    /// One part list: (source, event id or body, environment, account, operation).
    type Input = (String, Result<String, Vec<u8>>, Option<String>, Option<String>, Option<String>);

    fn input() -> impl Strategy<Value = Input> {
        (
            part(),
            prop_oneof![part().prop_map(Ok), proptest::collection::vec(any::<u8>(), 0..8).prop_map(Err)],
            proptest::option::of(part()),
            proptest::option::of(part()),
            proptest::option::of(part()),
        )
    }

    fn key_of(input: &Input) -> String {
        try_key_of(input).unwrap()
    }

    /// The key of a part list, or `None` when a part is empty (refused).
    fn try_key_of(input: &Input) -> Option<String> {
        let (source, event, environment, account, operation) = input;
        let (event_id, body_hash) = match event {
            Ok(id) => (id.clone(), false),
            Err(body) => (body_hash_field(body), true),
        };
        derive(&Parts {
            source,
            event_id: &event_id,
            environment: environment.as_deref(),
            account: account.as_deref(),
            operation: operation.as_deref(),
            body_hash,
        })
        .ok()
    }

    fn has_empty_part(input: &Input) -> bool {
        let (source, event, environment, account, operation) = input;
        source.is_empty()
            || event.as_ref().is_ok_and(|id| id.is_empty())
            || [environment, account, operation].iter().any(|p| p.as_deref() == Some(""))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// No two different part lists give one key, and every key is at
        /// most 255 characters. (Over-long keys end in a SHA-256, so
        /// "injective" there means: no collision short of breaking SHA-256.)
        #[test]
        fn keys_are_injective_and_bounded(inputs in proptest::collection::vec(input(), 2..24)) {
            let mut seen: HashMap<String, Input> = HashMap::new();
            for input in inputs {
                // An empty part is refused (22023), so it can collide with nothing.
                let Some(key) = try_key_of(&input) else {
                    prop_assert!(has_empty_part(&input));
                    continue;
                };
                prop_assert!(!has_empty_part(&input));
                prop_assert!(key.chars().count() <= MAX_KEY_CHARS, "{} chars", key.chars().count());
                if let Some(other) = seen.get(&key) {
                    prop_assert_eq!(other, &input, "two inputs share the key {}", key);
                }
                seen.insert(key, input);
            }
        }

        /// Near misses that a naive join would merge stay apart.
        #[test]
        fn shifting_characters_between_parts_changes_the_key(
            a in "[a-z:%]{1,8}",
            b in "[a-z:%]{1,8}",
            c in "[a-z:%]{1,8}",
        ) {
            let left = key_of(&(format!("{a}{b}"), Ok(c.clone()), None, None, None));
            let right = key_of(&(a.clone(), Ok(format!("{b}{c}")), None, None, None));
            prop_assert_ne!(left, right);
            let with_env = key_of(&(a.clone(), Ok(c.clone()), Some(b.clone()), None, None));
            let with_account = key_of(&(a, Ok(c), None, Some(b), None));
            prop_assert_ne!(with_env, with_account);
        }
    }

    #[test]
    fn body_keys_never_equal_id_keys() {
        let body = key_of(&("src".into(), Err(b"{}".to_vec()), None, None, None));
        assert_eq!(body, format!("src:%b{}", hex::encode(Sha256::digest(b"{}"))));
        // the same text given as an id is escaped, so it differs
        let id = key_of(&("src".into(), Ok(body_hash_field(b"{}")), None, None, None));
        assert_ne!(body, id);
        assert!(id.starts_with("src:%25b"));
    }
}
