//! The request's header map as the SQL functions receive it: a JSON object
//! whose names match case-insensitively (RFC 9110 section 5.1) and whose
//! values are a string or an array of strings (a header sent several times).

use crate::error::Error;
use serde_json::Value;
use std::collections::hash_map::Entry;
use std::collections::HashMap;

/// A header that must appear once was sent several times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeated;

/// Header names lower-cased, each with every value it was sent with.
///
/// A hash map, so that building it is linear in the number of headers (a
/// caller controls that number: 1,000,000 headers once took 20 minutes with
/// a list searched for every name). `std`'s map is keyed with a random
/// SipHash key per process, so names chosen to collide cannot make it
/// quadratic again.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Headers {
    entries: HashMap<String, Vec<String>>,
}

impl Headers {
    /// Build from `(name, value)` pairs; names are folded to lower case and
    /// repeated names collect their values in order.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut headers = Headers::default();
        for (name, value) in pairs {
            headers.push(name, value.to_string());
        }
        headers
    }

    /// Build from the text of a JSON object (`jsonb` output). Errors (22023)
    /// as [`Headers::from_json`], and when serde cannot represent the value
    /// (a number out of range, nesting deeper than 128).
    pub fn from_json_text(text: &str) -> Result<Self, Error> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| Error::invalid(format!("headers must be a JSON object of header names to values: {e}")))?;
        Headers::from_json(&value)
    }

    /// Build from a JSON object. Errors (22023) when it is not an object or
    /// a value is neither a string nor an array of strings.
    pub fn from_json(value: &Value) -> Result<Self, Error> {
        let Value::Object(map) = value else {
            return Err(NotHeaders::NotObject(json_kind(value)).into());
        };
        let mut headers = Headers::default();
        for (name, value) in map {
            match value {
                Value::String(text) => headers.push(name, text.clone()),
                Value::Array(items) => {
                    for item in items {
                        let Value::String(text) = item else {
                            return Err(NotHeaders::BadValue(name.clone(), json_kind(item)).into());
                        };
                        headers.push(name, text.clone());
                    }
                }
                other => return Err(NotHeaders::BadValue(name.clone(), json_kind(other)).into()),
            }
        }
        Ok(headers)
    }

    /// Build from a JSON object's members, each a name with its values (a
    /// string member has one), as the extension's `jsonb::Jsonb::string_members`
    /// reads them; names are folded and merged as in [`Headers::from_pairs`].
    pub fn from_members(members: Vec<(String, Vec<String>)>) -> Self {
        let mut headers = Headers { entries: HashMap::with_capacity(members.len()) };
        for (mut name, values) in members {
            super::ct::check_interrupts(); // a caller chooses how many there are
            if values.is_empty() {
                continue; // `"X-Sig": []` sends the header no value, as if absent
            }
            name.make_ascii_lowercase();
            match headers.entries.entry(name) {
                Entry::Vacant(slot) => {
                    slot.insert(values);
                }
                Entry::Occupied(mut slot) => slot.get_mut().extend(values),
            }
        }
        headers
    }

    fn push(&mut self, name: &str, value: String) {
        self.entries.entry(name.to_ascii_lowercase()).or_default().push(value);
    }

    /// Every value of header `name` (given in lower case).
    pub fn all(&self, name: &str) -> &[String] {
        debug_assert_eq!(name, name.to_ascii_lowercase());
        self.entries.get(name).map_or(&[], Vec::as_slice)
    }

    /// The single value of header `name`: `Ok(None)` when absent,
    /// `Err(Repeated)` when sent more than once (ambiguous, so rejected).
    pub fn one(&self, name: &str) -> Result<Option<&str>, Repeated> {
        match self.all(name) {
            [] => Ok(None),
            [value] => Ok(Some(value.as_str())),
            _ => Err(Repeated),
        }
    }
}

/// Why a JSON value is not a header map: the kind of the value itself
/// ("a number", ...) when it is not an object, or a member's name and the
/// kind of its offending value (not a string, nor an array of strings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotHeaders {
    NotObject(&'static str),
    BadValue(String, &'static str),
}

impl From<NotHeaders> for Error {
    fn from(shape: NotHeaders) -> Error {
        match shape {
            NotHeaders::NotObject(kind) => {
                Error::invalid(format!("headers must be a JSON object of header names to values, not {kind}"))
            }
            NotHeaders::BadValue(name, kind) => {
                Error::invalid(format!("header \"{name}\" must be a string or an array of strings, not {kind}"))
            }
        }
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_fold_case_and_merge() {
        let h = Headers::from_json(&json!({"X-Hub-Signature-256": "a", "x-hub-signature-256": ["b", "c"]})).unwrap();
        assert_eq!(h.all("x-hub-signature-256"), ["a", "b", "c"]);
        assert_eq!(h.one("x-hub-signature-256"), Err(Repeated));
        assert_eq!(h.one("missing"), Ok(None));
    }

    #[test]
    fn text_that_serde_cannot_hold_is_an_error_not_a_panic() {
        let huge = format!("{{\"a\": {}}}", "9".repeat(400));
        assert!(Headers::from_json_text(&huge).is_err());
        let deep = format!("{{\"a\": {}{}}}", "[".repeat(200), "]".repeat(200));
        assert!(Headers::from_json_text(&deep).is_err());
        assert_eq!(Headers::from_json_text(r#"{"A": "b"}"#).unwrap().all("a"), ["b"]);
    }

    #[test]
    fn rejects_non_string_values() {
        assert!(Headers::from_json(&json!(["a"])).is_err());
        assert!(Headers::from_json(&json!({"a": 1})).is_err());
        assert!(Headers::from_json(&json!({"a": [1]})).is_err());
        assert!(Headers::from_json(&json!({"a": null})).is_err());
        assert_eq!(Headers::from_json(&json!({"a": []})).unwrap().all("a").len(), 0);
    }
}
