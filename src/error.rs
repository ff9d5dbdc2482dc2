//! The core's error type ([`webhook_dedup_core::error::Error`]) raised as
//! a PostgreSQL ERROR with its SQLSTATE.
//!
//! pgrx 0.18 reports `error!()` and panics as XX000 (internal_error) and a
//! bare `Err(E)` returned from a `#[pg_extern]` as 22000; a caller's mistake
//! deserves a precise code, so every user-facing failure goes through
//! [`Raise::raise`].

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

pub use webhook_dedup_core::error::Error;

/// Raising an [`Error`] (a trait: the type is the core's).
pub trait Raise {
    /// Raise this error as a Postgres ERROR with its SQLSTATE and hint;
    /// never returns. The reported location is the caller's.
    #[track_caller]
    fn raise(self) -> !;
}

impl Raise for Error {
    #[track_caller]
    fn raise(self) -> ! {
        let mut report = ErrorReport::new(sqlstate(&self), self.to_string(), "webhook_dedup");
        if let Some(hint) = self.hint() {
            report = report.set_hint(hint.to_string());
        }
        report.report(PgLogLevel::ERROR);
        unreachable!("ereport(ERROR) returned")
    }
}

/// Report a NOTICE with a HINT (something the caller should know that is
/// not an error: a redrive that will skip keys, an export of a source that
/// archives nothing).
pub fn notice(message: impl Into<String>, hint: impl Into<String>) {
    ErrorReport::new(PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION, message.into(), "webhook_dedup")
        .set_hint(hint.into())
        .report(PgLogLevel::NOTICE);
}

/// The error's SQLSTATE as PostgreSQL packs it (`MAKE_SQLSTATE`: six bits
/// per character, the first lowest).
pub fn sqlstate(error: &Error) -> PgSqlErrorCode {
    let packed = error
        .sqlstate()
        .bytes()
        .enumerate()
        .fold(0i32, |code, (i, c)| code + (((i32::from(c) - i32::from(b'0')) & 0x3F) << (6 * i)));
    PgSqlErrorCode::from(packed)
}

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
            Err(error) => Raise::raise(error.into()),
        }
    }
}

/// A required argument: NULL raises 22004 naming the argument.
#[track_caller]
pub fn required<T>(value: Option<T>, what: &'static str) -> T {
    match value {
        Some(value) => value,
        None => Raise::raise(Error::NullValue { what }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The core's codes, packed, are the codes pgrx names.
    #[test]
    fn every_code_maps_to_its_postgresql_errcode() {
        let cases = [
            (Error::NullValue { what: "x" }, PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED),
            (Error::invalid("x"), PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE),
            (Error::NoDataFound { message: "x".into() }, PgSqlErrorCode::ERRCODE_NO_DATA_FOUND),
            (Error::SerializationFailure { message: "x".into() }, PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE),
            (
                Error::NotInPrerequisiteState { message: "x".into(), hint: None },
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            ),
            (Error::UndefinedColumn { message: "x".into() }, PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN),
            (Error::DatatypeMismatch { message: "x".into() }, PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH),
            (
                Error::TriggerProtocolViolated { message: "x".into() },
                PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
            ),
            (
                Error::FeatureNotSupported { message: "x".into(), hint: None },
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            ),
        ];
        for (error, code) in cases {
            assert_eq!(sqlstate(&error), code, "{error:?}");
        }
    }
}
