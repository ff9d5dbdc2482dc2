//! One error type for every rule of the core, each with its SQLSTATE.
//!
//! The extension raises it with `ereport` (`src/error.rs`: pgrx 0.18
//! reports `error!()` and panics as XX000 and a bare `Err(E)` returned from
//! a `#[pg_extern]` as 22000, so every user-facing failure is raised with
//! the code given here). Codes are PostgreSQL's (Appendix A, "PostgreSQL
//! Error Codes").

use std::fmt;

/// A failure that surfaces as an SQL error with a deliberate SQLSTATE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// 22004 null_value_not_allowed: a required argument was NULL.
    NullValue { what: &'static str },
    /// 22023 invalid_parameter_value: an argument has the right type but an
    /// unacceptable value (empty key, bad secret, unknown scheme, ...).
    InvalidParameter { message: String, hint: Option<String> },
    /// P0002 no_data_found: what the call names does not exist.
    NoDataFound { message: String },
    /// P0002 no_data_found: the idempotency key named by the call does not
    /// exist ([`Error::unknown_key`]).
    UnknownKey { source: String, idem_key: String },
    /// 40001 serialization_failure: a race that the caller's REPEATABLE READ
    /// or SERIALIZABLE snapshot cannot see; retry the transaction.
    SerializationFailure { message: String },
    /// 55000 object_not_in_prerequisite_state: something the call needs is
    /// missing (for example the library is not preloaded).
    NotInPrerequisiteState { message: String, hint: Option<String> },
    /// 42703 undefined_column: a trigger argument names no column.
    UndefinedColumn { message: String },
    /// 42804 datatype_mismatch: a column has the wrong type for its use.
    DatatypeMismatch { message: String },
    /// 39P01 trigger_protocol_violated: a trigger function fired in a way
    /// it does not support.
    TriggerProtocolViolated { message: String },
    /// 0A000 feature_not_supported: the call is not available in this
    /// configuration (for example the outbox on a distributed install).
    FeatureNotSupported { message: String, hint: Option<String> },
}

impl Error {
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidParameter { message: message.into(), hint: None }
    }

    pub fn invalid_with_hint(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Error::InvalidParameter { message: message.into(), hint: Some(hint.into()) }
    }

    /// P0002 for `idem_key` of `source`, which does not exist. A key
    /// that does not start with `<source>:` is most likely a bare event id
    /// passed where the key `webhook_key` derives from it is wanted: the
    /// HINT says so.
    pub fn unknown_key(source: &str, idem_key: &str) -> Self {
        Error::UnknownKey { source: source.to_string(), idem_key: idem_key.to_string() }
    }

    /// The SQLSTATE this error is reported with: five characters, as
    /// PostgreSQL's `errcodes.txt` spells them.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            Error::NullValue { .. } => "22004",
            Error::InvalidParameter { .. } => "22023",
            Error::NoDataFound { .. } | Error::UnknownKey { .. } => "P0002",
            Error::SerializationFailure { .. } => "40001",
            Error::NotInPrerequisiteState { .. } => "55000",
            Error::UndefinedColumn { .. } => "42703",
            Error::DatatypeMismatch { .. } => "42804",
            Error::TriggerProtocolViolated { .. } => "39P01",
            Error::FeatureNotSupported { .. } => "0A000",
        }
    }

    /// The HINT reported with the error, if any.
    pub fn hint(&self) -> Option<std::borrow::Cow<'_, str>> {
        match self {
            Error::InvalidParameter { hint, .. }
            | Error::NotInPrerequisiteState { hint, .. }
            | Error::FeatureNotSupported { hint, .. } => hint.as_deref().map(Into::into),
            Error::SerializationFailure { .. } => {
                Some("Retry the transaction; the key was changed by a concurrent transaction.".into())
            }
            Error::UnknownKey { source, idem_key } if !idem_key.starts_with(&format!("{source}:")) => Some(
                format!(
                    "A key made from a provider's event id starts with \"{source}:\": pass \
                     webhook_dedup.webhook_key('{source}', <event id>) (here perhaps \
                     webhook_dedup.webhook_key('{source}', '{}')), or the idem_key webhook_receive returned, \
                     not the bare event id.",
                    idem_key.replace('\'', "''")
                )
                .into(),
            ),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NullValue { what } => write!(f, "{what} must not be NULL"),
            Error::InvalidParameter { message, .. }
            | Error::NoDataFound { message }
            | Error::SerializationFailure { message }
            | Error::NotInPrerequisiteState { message, .. }
            | Error::UndefinedColumn { message }
            | Error::DatatypeMismatch { message }
            | Error::TriggerProtocolViolated { message }
            | Error::FeatureNotSupported { message, .. } => f.write_str(message),
            Error::UnknownKey { source, idem_key } => {
                write!(f, "no idempotency key \"{idem_key}\" for source \"{source}\"")
            }
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_five_sqlstate_characters() {
        let all = [
            Error::NullValue { what: "x" },
            Error::invalid("x"),
            Error::NoDataFound { message: "x".into() },
            Error::unknown_key("s", "k"),
            Error::SerializationFailure { message: "x".into() },
            Error::NotInPrerequisiteState { message: "x".into(), hint: None },
            Error::UndefinedColumn { message: "x".into() },
            Error::DatatypeMismatch { message: "x".into() },
            Error::TriggerProtocolViolated { message: "x".into() },
            Error::FeatureNotSupported { message: "x".into(), hint: None },
        ];
        for e in &all {
            let code = e.sqlstate();
            assert_eq!(code.len(), 5, "{e:?}");
            assert!(code.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()), "{e:?}");
        }
        assert_eq!(Error::NullValue { what: "payload" }.to_string(), "payload must not be NULL");
        assert!(Error::SerializationFailure { message: "x".into() }.hint().is_some());
    }

    /// A bare event id where the key is wanted gets a HINT naming
    /// webhook_key; a key of the source's own shape none.
    #[test]
    fn an_unknown_bare_event_id_is_hinted_at_webhook_key() {
        let bare = Error::unknown_key("stripe", "evt_1");
        assert_eq!(bare.to_string(), "no idempotency key \"evt_1\" for source \"stripe\"");
        assert_eq!(bare.sqlstate(), "P0002");
        let hint = bare.hint().unwrap();
        assert!(hint.contains("webhook_dedup.webhook_key('stripe', 'evt_1')"), "{hint}");
        assert!(Error::unknown_key("stripe", "stripe:evt_1").hint().is_none());
        let quoted = Error::unknown_key("s", "it's").hint().unwrap().into_owned();
        assert!(quoted.contains("'it''s'"), "{quoted}");
    }
}
