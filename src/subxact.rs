//! Internal subtransactions and scoped settings, as PL handlers use them
//! (plpython's `PLy_spi_subtransaction_begin/abort`): run a step that may
//! fail without aborting the caller's transaction, and change settings for
//! the length of a step only.

use pgrx::pg_sys;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::PgTryBuilder;
use std::ffi::CString;
use std::panic::UnwindSafe;

/// Why a step failed: its SQLSTATE and message.
#[derive(Debug, Clone)]
pub struct Failure {
    pub sqlstate: pgrx::PgSqlErrorCode,
    pub message: String,
}

/// Run `body` in an internal subtransaction. On an ERROR (or a Rust
/// panic) the subtransaction is rolled back, undoing what `body` did,
/// releasing the locks it took and restoring settings it changed, and the
/// failure is returned; the caller's transaction goes on.
pub fn attempt<R>(body: impl FnOnce() -> R + UnwindSafe) -> Result<R, Failure> {
    // SAFETY: the sequence is PostgreSQL's documented pattern for internal
    // subtransactions: remember the memory context and resource owner,
    // begin, run, then release (or roll back) and restore both. pgrx has
    // already copied and flushed the error state when the catch runs.
    unsafe {
        let context = pg_sys::CurrentMemoryContext;
        let owner = pg_sys::CurrentResourceOwner;
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(context);
        PgTryBuilder::new(move || {
            let result = body();
            pg_sys::ReleaseCurrentSubTransaction();
            pg_sys::MemoryContextSwitchTo(context);
            pg_sys::CurrentResourceOwner = owner;
            Ok(result)
        })
        .catch_others(move |caught| {
            pg_sys::MemoryContextSwitchTo(context);
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
            pg_sys::MemoryContextSwitchTo(context);
            pg_sys::CurrentResourceOwner = owner;
            Err(match caught {
                CaughtError::PostgresError(report)
                | CaughtError::ErrorReport(report)
                | CaughtError::RustPanic { ereport: report, .. } => {
                    Failure { sqlstate: report.sql_error_code(), message: report.message().to_string() }
                }
            })
        })
        .execute()
    }
}

/// Run `body` with `settings` (name, value) in force, restoring the
/// previous values afterwards (also when `body` raises: the enclosing
/// (sub)transaction's abort pops the nesting level).
pub fn with_settings<R>(settings: &[(&str, &str)], body: impl FnOnce() -> R) -> R {
    // SAFETY: NewGUCNestLevel/AtEOXact_GUC bracket settings made with
    // GUC_ACTION_SAVE, as PostgreSQL's own code does (ri_triggers.c,
    // functioncmds.c); the C strings outlive the calls.
    unsafe {
        let level = pg_sys::NewGUCNestLevel();
        for (name, value) in settings {
            let name = CString::new(*name).expect("setting names have no NUL");
            let value = CString::new(*value).expect("setting values have no NUL");
            pg_sys::set_config_option(
                name.as_ptr(),
                value.as_ptr(),
                pg_sys::GucContext::PGC_USERSET,
                pg_sys::GucSource::PGC_S_SESSION,
                pg_sys::GucAction::GUC_ACTION_SAVE,
                true,
                0,
                false,
            );
        }
        let result = body();
        pg_sys::AtEOXact_GUC(true, level);
        result
    }
}
