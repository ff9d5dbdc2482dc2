//! A source's own intake settings, the columns of `webhook_dedup.sources`
//! that tell `webhook_receive` how to read its deliveries where the
//! provider's profile does not (a provider without a built-in profile, the
//! generic `hmac` scheme) or not as wanted:
//!
//! - `event_id_from`, `event_type_from`, `event_time_from`: where the value
//!   lives, either `header:<name>` (an HTTP field name, RFC 9110 section
//!   5.1, any case) or a JSON pointer into the body (RFC 6901, starting
//!   with `/`);
//! - `event_time_format`: `unix_seconds`, `unix_milliseconds` or `rfc3339`,
//!   set exactly when `event_time_from` is;
//! - `fingerprint_pointers`: JSON pointers whose values the key's
//!   fingerprint covers (RFC 8785 canonical JSON), or an empty array for
//!   the raw body bytes;
//! - `replay_guard`: whether deliveries claim a replay guard
//!   (`crate::store::replay_guards`);
//! - `accept_event_types`: the event types the source wants; a name ending
//!   in `*` matches every type that starts with what precedes it. Other
//!   verified deliveries are answered `ignored`.
//!
//! NULL columns keep the profile's rule. Every value is checked when the
//! row is written (the check constraint `sources_intake`, 22023) with the same parser
//! a delivery uses, so a bad pointer fails the configuration, not a
//! delivery. Pure Rust.

use crate::error::Error;
use crate::profile::{is_json_pointer, FingerprintRule, Location, Rules, TimeFormat};
use crate::signature::Scheme;

/// The longest location or pointer, in bytes.
pub const MAX_POINTER_BYTES: usize = 1_024;
/// The most pointers a fingerprint covers.
pub const MAX_FINGERPRINT_POINTERS: usize = 64;
/// The most entries of `accept_event_types`.
pub const MAX_ACCEPTED_TYPES: usize = 1_000;
/// The longest entry of `accept_event_types`, in characters.
pub const MAX_TYPE_CHARS: usize = 255;

const HEADER_PREFIX: &str = "header:";

/// Where a source's value lives (parsed `*_from` column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A header, its name lower-cased.
    Header(String),
    /// A JSON pointer (RFC 6901) into the body, not empty.
    Pointer(String),
}

impl Place {
    /// Parse `header:<name>` or a JSON pointer; the message says what is wrong.
    pub fn parse(text: &str) -> Result<Place, String> {
        if text.len() > MAX_POINTER_BYTES {
            return Err(format!("is longer than {MAX_POINTER_BYTES} bytes"));
        }
        if let Some(name) = text.strip_prefix(HEADER_PREFIX) {
            return if !name.is_empty() && name.bytes().all(is_tchar) {
                Ok(Place::Header(name.to_ascii_lowercase()))
            } else {
                Err(format!("\"{text}\" names no valid header field (RFC 9110 section 5.1: letters, digits and !#$%&'*+-.^_`|~)"))
            };
        }
        if text.is_empty() || !is_json_pointer(text) {
            return Err(format!(
                "\"{text}\" is neither header:<name> nor a JSON pointer (RFC 6901: \"/\" followed by tokens in which \
                 \"~\" is followed by 0 or 1)"
            ));
        }
        Ok(Place::Pointer(text.to_string()))
    }

    pub fn location(&self) -> Location<'_> {
        match self {
            Place::Header(name) => Location::Header(name),
            Place::Pointer(pointer) => Location::Body(pointer),
        }
    }
}

/// RFC 9110 section 5.6.2: `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The intake columns of one `webhook_dedup.sources` row, as read.
#[derive(Debug, Clone, Default)]
pub struct Columns {
    pub event_id_from: Option<String>,
    pub event_type_from: Option<String>,
    pub event_time_from: Option<String>,
    pub event_time_format: Option<String>,
    pub fingerprint_pointers: Option<Vec<Option<String>>>,
    pub replay_guard: Option<bool>,
    pub accept_event_types: Option<Vec<Option<String>>>,
}

/// A source's intake settings, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceIntake {
    pub event_id: Option<Place>,
    pub event_type: Option<Place>,
    pub event_time: Option<(Place, TimeFormat)>,
    /// `Some(empty)`: the raw body.
    pub fingerprint: Option<Vec<String>>,
    pub replay_guard: Option<bool>,
    pub accept_event_types: Option<Vec<String>>,
}

impl SourceIntake {
    /// Check and parse a row's columns; 22023 naming the column and the
    /// problem (a column's value, never a secret, is quoted).
    pub fn parse(source: &str, columns: Columns) -> Result<SourceIntake, Error> {
        let bad = |column: &str, problem: String| {
            Error::invalid(format!("webhook_dedup.sources.{column} {problem} (source \"{source}\")"))
        };
        let place = |column: &str, text: Option<String>| {
            text.map(|t| Place::parse(&t).map_err(|problem| bad(column, problem))).transpose()
        };
        let event_id = place("event_id_from", columns.event_id_from)?;
        let event_type = place("event_type_from", columns.event_type_from)?;
        let time_place = place("event_time_from", columns.event_time_from)?;
        let event_time = match (time_place, columns.event_time_format) {
            (None, None) => None,
            (Some(place), Some(format)) => {
                let names = TimeFormat::ALL.map(TimeFormat::name).join(", ");
                let format = TimeFormat::parse(&format)
                    .ok_or_else(|| bad("event_time_format", format!("\"{format}\" is not one of {names}")))?;
                Some((place, format))
            }
            (Some(_), None) => return Err(bad("event_time_format", "must be set when event_time_from is".into())),
            (None, Some(_)) => return Err(bad("event_time_format", "is set without event_time_from".into())),
        };
        let fingerprint = match columns.fingerprint_pointers {
            None => None,
            Some(pointers) => {
                if pointers.len() > MAX_FINGERPRINT_POINTERS {
                    return Err(bad(
                        "fingerprint_pointers",
                        format!("has more than {MAX_FINGERPRINT_POINTERS} pointers"),
                    ));
                }
                let mut checked = Vec::with_capacity(pointers.len());
                for pointer in pointers {
                    let pointer = pointer.ok_or_else(|| bad("fingerprint_pointers", "holds a NULL".into()))?;
                    if pointer.len() > MAX_POINTER_BYTES || !is_json_pointer(&pointer) {
                        return Err(bad(
                            "fingerprint_pointers",
                            format!("holds \"{pointer}\", which is no JSON pointer (RFC 6901) of at most {MAX_POINTER_BYTES} bytes"),
                        ));
                    }
                    if !checked.contains(&pointer) {
                        checked.push(pointer);
                    }
                }
                Some(checked)
            }
        };
        let accept_event_types = match columns.accept_event_types {
            None => None,
            Some(types) => {
                if types.is_empty() {
                    return Err(bad("accept_event_types", "is empty (NULL accepts every event type)".into()));
                }
                if types.len() > MAX_ACCEPTED_TYPES {
                    return Err(bad("accept_event_types", format!("has more than {MAX_ACCEPTED_TYPES} entries")));
                }
                let mut checked = Vec::with_capacity(types.len());
                for name in types {
                    let name = name.ok_or_else(|| bad("accept_event_types", "holds a NULL".into()))?;
                    let chars = name.chars().count();
                    let star = name.find('*');
                    if chars == 0
                        || chars > MAX_TYPE_CHARS
                        || star.is_some_and(|at| at + 1 != name.len())
                        || name == "*"
                    {
                        return Err(bad(
                            "accept_event_types",
                            format!(
                                "holds \"{name}\": an entry has 1 to {MAX_TYPE_CHARS} characters and at most one *, \
                                 at its end after a prefix"
                            ),
                        ));
                    }
                    checked.push(name);
                }
                Some(checked)
            }
        };
        Ok(SourceIntake {
            event_id,
            event_type,
            event_time,
            fingerprint,
            replay_guard: columns.replay_guard,
            accept_event_types,
        })
    }

    /// Whether every column is NULL (the profile's rules apply as they are).
    pub fn is_default(&self) -> bool {
        *self == SourceIntake::default()
    }

    /// `rules` (of `scheme`) with this source's settings in place of the
    /// profile's. The replay guard, unless the source sets it, is on when
    /// the profile has it on, and when the source reads its event id from a
    /// header the scheme does not sign ([`Scheme::signed_id_headers`]):
    /// whoever captured one delivery could re-send it under a new id
    /// (the generic `hmac` signs the body only).
    pub fn apply<'a>(&'a self, rules: Rules<'a>, scheme: Scheme) -> Rules<'a> {
        let unsigned_id = matches!(&self.event_id, Some(Place::Header(name))
            if !scheme.signed_id_headers().contains(&name.as_str()));
        Rules {
            event_id: self.event_id.as_ref().map(Place::location).or(rules.event_id),
            event_type: self.event_type.as_ref().map(Place::location).or(rules.event_type),
            event_time: self.event_time.as_ref().map(|(p, f)| (p.location(), *f)).or(rules.event_time),
            fingerprint: match &self.fingerprint {
                None => rules.fingerprint,
                Some(pointers) if pointers.is_empty() => FingerprintRule::Body,
                Some(pointers) => FingerprintRule::Configured(pointers),
            },
            replay_guard: self.replay_guard.unwrap_or(rules.replay_guard || unsigned_id),
            body_key: rules.body_key,
        }
    }

    /// Whether the source wants events of `event_type` (every type when
    /// `accept_event_types` is NULL; an event without a type only then).
    pub fn accepts(&self, event_type: Option<&str>) -> bool {
        let Some(accepted) = &self.accept_event_types else { return true };
        let Some(event_type) = event_type else { return false };
        accepted.iter().any(|entry| match entry.strip_suffix('*') {
            Some(prefix) => event_type.starts_with(prefix),
            None => entry == event_type,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{extract, Body, Extracted};
    use crate::signature::{Headers, Scheme};

    fn parse(columns: Columns) -> Result<SourceIntake, String> {
        SourceIntake::parse("acme", columns).map_err(|e| e.to_string())
    }

    fn some(texts: &[&str]) -> Option<Vec<Option<String>>> {
        Some(texts.iter().map(|t| Some(t.to_string())).collect())
    }

    #[test]
    fn places_are_headers_or_json_pointers() {
        assert_eq!(Place::parse("header:X-Acme-Id"), Ok(Place::Header("x-acme-id".into())));
        assert_eq!(Place::parse("/data/id"), Ok(Place::Pointer("/data/id".into())));
        assert_eq!(Place::parse("/a~1b/~0c/0"), Ok(Place::Pointer("/a~1b/~0c/0".into())));
        for bad in ["", "data/id", "/a~2", "/a~", "header:", "header:X Acme", "header:x:y", "Header:x"] {
            assert!(Place::parse(bad).is_err(), "{bad:?}");
        }
        assert!(Place::parse(&format!("/{}", "a".repeat(MAX_POINTER_BYTES))).is_err());
    }

    #[test]
    fn invalid_columns_are_22023_naming_the_column() {
        let err = parse(Columns { event_id_from: Some("id".into()), ..Default::default() }).unwrap_err();
        assert!(err.contains("event_id_from") && err.contains("\"id\""), "{err}");
        let err = parse(Columns { event_time_from: Some("/t".into()), ..Default::default() }).unwrap_err();
        assert!(err.contains("event_time_format must be set"), "{err}");
        let err = parse(Columns { event_time_format: Some("rfc3339".into()), ..Default::default() }).unwrap_err();
        assert!(err.contains("without event_time_from"), "{err}");
        let err = parse(Columns {
            event_time_from: Some("/t".into()),
            event_time_format: Some("iso".into()),
            ..Default::default()
        })
        .unwrap_err();
        assert!(err.contains("unix_seconds, unix_milliseconds, rfc3339"), "{err}");
        let err = parse(Columns { fingerprint_pointers: some(&["/a", "b"]), ..Default::default() }).unwrap_err();
        assert!(err.contains("fingerprint_pointers") && err.contains("\"b\""), "{err}");
        let err = parse(Columns { fingerprint_pointers: Some(vec![None]), ..Default::default() }).unwrap_err();
        assert!(err.contains("NULL"), "{err}");
        let too_many: Vec<String> = (0..=MAX_FINGERPRINT_POINTERS).map(|i| format!("/{i}")).collect();
        let refs: Vec<&str> = too_many.iter().map(String::as_str).collect();
        assert!(parse(Columns { fingerprint_pointers: some(&refs), ..Default::default() }).is_err());
        for bad in [&[][..], &["*"], &["a*b"], &["**"], &[""]] {
            let err = parse(Columns { accept_event_types: some(bad), ..Default::default() }).unwrap_err();
            assert!(err.contains("accept_event_types"), "{bad:?}: {err}");
        }
        assert!(parse(Columns { accept_event_types: Some(vec![None]), ..Default::default() }).is_err());
    }

    #[test]
    fn a_custom_source_reads_like_a_profile() {
        let intake = parse(Columns {
            event_id_from: Some("header:X-Acme-Delivery".into()),
            event_type_from: Some("/kind".into()),
            event_time_from: Some("/at".into()),
            event_time_format: Some("unix_milliseconds".into()),
            fingerprint_pointers: some(&["/kind", "/data", "/data"]),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            intake.fingerprint.as_deref(),
            Some(&["/kind".to_string(), "/data".to_string()][..]),
            "deduplicated"
        );
        let rules = intake.apply(Rules::of(Scheme::Hmac), Scheme::Hmac);
        let headers = Headers::from_pairs([("X-Acme-Delivery", "d-1")]);
        let body = br#"{"kind":"order.paid","at":1700000000123,"data":{"n":1},"attempt":1}"#;
        let got = extract(&rules, &headers, &Body::new(body)).unwrap();
        let pg_us = (1_700_000_000_123 - crate::calendar::PG_EPOCH_UNIX_S * 1_000) * 1_000;
        assert_eq!(
            got,
            Extracted { event_id: Some("d-1".into()), event_type: Some("order.paid".into()), event_time: Some(pg_us) }
        );
        let retry = br#"{"attempt":2,"data":{"n":1},"kind":"order.paid","at":1700000000999}"#;
        let changed = br#"{"kind":"order.paid","at":1700000000123,"data":{"n":2},"attempt":1}"#;
        let fp = |b: &[u8]| rules.fingerprint.fingerprint(&Body::new(b));
        assert_eq!(fp(body), fp(retry), "attempt and at are not covered");
        assert_ne!(fp(body), fp(changed));
        assert!(rules.replay_guard, "the id is in a header hmac does not sign: a re-send under a new id is a replay");
        let from_body = parse(Columns { event_id_from: Some("/id".into()), ..Default::default() }).unwrap();
        assert!(!from_body.apply(Rules::of(Scheme::Hmac), Scheme::Hmac).replay_guard, "a signed body's own id");
        let off = parse(Columns {
            event_id_from: Some("header:x-acme-delivery".into()),
            replay_guard: Some(false),
            ..Default::default()
        })
        .unwrap();
        assert!(!off.apply(Rules::of(Scheme::Hmac), Scheme::Hmac).replay_guard, "the source's own choice wins");
        let signed_id =
            parse(Columns { event_id_from: Some("header:webhook-id".into()), ..Default::default() }).unwrap();
        assert!(
            !signed_id.apply(Rules::of(Scheme::Standard), Scheme::Standard).replay_guard,
            "Standard signs webhook-id"
        );
    }

    #[test]
    fn overrides_replace_only_what_is_set() {
        let github = Rules::of(Scheme::Github);
        assert!(github.replay_guard);
        let off = parse(Columns { replay_guard: Some(false), ..Default::default() }).unwrap();
        let rules = off.apply(github, Scheme::Github);
        assert_eq!((rules.event_id, rules.replay_guard), (github.event_id, false));
        let raw = parse(Columns { fingerprint_pointers: Some(vec![]), ..Default::default() }).unwrap();
        assert_eq!(raw.apply(Rules::of(Scheme::Stripe), Scheme::Stripe).fingerprint, FingerprintRule::Body);
        assert!(SourceIntake::default().is_default() && !raw.is_default());
    }

    #[test]
    fn accepted_types_match_exactly_or_by_prefix() {
        let intake = parse(Columns {
            accept_event_types: some(&["push", "invoice.*", "customer.created"]),
            ..Default::default()
        })
        .unwrap();
        assert!(intake.accepts(Some("push")));
        assert!(intake.accepts(Some("invoice.paid")));
        assert!(intake.accepts(Some("invoice.")));
        assert!(!intake.accepts(Some("invoice")));
        assert!(!intake.accepts(Some("Push")), "case-sensitive");
        assert!(!intake.accepts(Some("customer.created.x")));
        assert!(!intake.accepts(None), "an event without a type is not a listed type");
        assert!(SourceIntake::default().accepts(None));
    }

    /// What the configuration accepts resolves at delivery as RFC 6901 says (serde_json's `Value::pointer`): escapes in order, the
    /// empty name, no leading zeros and no `-` in arrays.
    #[test]
    fn pointers_resolve_as_rfc_6901() {
        let body = br#"{"a/b":{"m~n":[10,20]},"":{"":"empty"},"~1":"tilde-one","x":{"01":"key"}}"#;
        let body = Body::new(body);
        let json = body.json().unwrap();
        let at = |p: &str| {
            assert!(matches!(Place::parse(p), Ok(Place::Pointer(_))), "{p}");
            json.pointer(p).cloned()
        };
        assert_eq!(at("/a~1b/m~0n/1"), Some(serde_json::json!(20)));
        assert_eq!(at("//"), Some(serde_json::json!("empty")));
        assert_eq!(at("/~01"), Some(serde_json::json!("tilde-one")));
        assert_eq!(at("/x/01"), Some(serde_json::json!("key")), "an object member named 01");
        assert_eq!(at("/a~1b/m~0n/01"), None, "no leading zero in an array index");
        assert_eq!(at("/a~1b/m~0n/-"), None);
    }
}
