//! One error type for the whole extension and its one mapping to SQLSTATEs.
//!
//! pgrx 0.18 reports `error!()` and panics as XX000 (internal_error) and a
//! bare `Err(E)` returned from a `#[pg_extern]` as 22000; a caller's mistake
//! deserves a precise code, so every user-facing failure goes through
//! [`Error::raise`].

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use std::fmt;

/// A failure that surfaces as an SQL error with a deliberate SQLSTATE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// 22004 null_value_not_allowed: a required argument was NULL.
    NullValue { what: &'static str },
    /// 22023 invalid_parameter_value: an argument has the right type but an
    /// unacceptable value (empty key, bad secret, unknown scheme, ...).
    InvalidParameter { message: String, hint: Option<String> },
    /// P0002 no_data_found: the key named by the call does not exist.
    NoDataFound { message: String },
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

    /// The SQLSTATE this error is reported with.
    pub fn sqlstate(&self) -> PgSqlErrorCode {
        match self {
            Error::NullValue { .. } => PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            Error::InvalidParameter { .. } => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            Error::NoDataFound { .. } => PgSqlErrorCode::ERRCODE_NO_DATA_FOUND,
            Error::SerializationFailure { .. } => PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
            Error::NotInPrerequisiteState { .. } => PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            Error::UndefinedColumn { .. } => PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
            Error::DatatypeMismatch { .. } => PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
            Error::TriggerProtocolViolated { .. } => PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
            Error::FeatureNotSupported { .. } => PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        }
    }

    fn hint(&self) -> Option<&str> {
        match self {
            Error::InvalidParameter { hint, .. }
            | Error::NotInPrerequisiteState { hint, .. }
            | Error::FeatureNotSupported { hint, .. } => hint.as_deref(),
            Error::SerializationFailure { .. } => {
                Some("Retry the transaction; the key was changed by a concurrent transaction.")
            }
            _ => None,
        }
    }

    /// Raise this error as a Postgres ERROR; never returns. The reported
    /// location is the caller's.
    #[track_caller]
    pub fn raise(self) -> ! {
        let mut report = ErrorReport::new(self.sqlstate(), self.to_string(), "webhook_dedup");
        if let Some(hint) = self.hint() {
            report = report.set_hint(hint.to_string());
        }
        report.report(PgLogLevel::ERROR);
        unreachable!("ereport(ERROR) returned")
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
        }
    }
}

impl std::error::Error for Error {}

/// Unwrap a result or raise its error.
pub trait OrRaise<T> {
    #[track_caller]
    fn or_raise(self) -> T;
}

impl<T, E: Into<Error>> OrRaise<T> for Result<T, E> {
    #[track_caller]
    fn or_raise(self) -> T {
        match self {
            Ok(value) => value,
            Err(error) => error.into().raise(),
        }
    }
}

/// A required argument: NULL raises 22004 naming the argument.
#[track_caller]
pub fn required<T>(value: Option<T>, what: &'static str) -> T {
    match value {
        Some(value) => value,
        None => Error::NullValue { what }.raise(),
    }
}
