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

impl Failure {
    /// Its SQLSTATE as the five characters PostgreSQL prints (`55P03`):
    /// `MAKE_SQLSTATE` packs each character in six bits, lowest first.
    pub fn code(&self) -> String {
        let packed = self.sqlstate as i64;
        (0..5).map(|i| char::from(b'0' + ((packed >> (6 * i)) & 0x3F) as u8)).collect()
    }
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

/// Run `body` in an internal subtransaction, as [`attempt`], but give up
/// only on an ERROR whose SQLSTATE is `code` and that `ours` (asked in the
/// catch, after the subtransaction is rolled back) claims: then `None`.
/// Any other ERROR (or panic) is re-raised unchanged (its SQLSTATE,
/// message, detail and hint) once the subtransaction is rolled back, so the
/// caller's transaction aborts with it as it would have without the
/// subtransaction. While `body` runs, [`in_transaction_block`] answers for
/// the transaction around it, not for the subtransaction.
pub fn attempt_unless<R>(
    code: pgrx::PgSqlErrorCode,
    ours: impl Fn() -> bool,
    body: impl FnOnce() -> R + UnwindSafe,
) -> Option<R> {
    let outer = OuterBlock::enter();
    // (asked after the rollback, once: nothing of it is observed mid-unwind)
    let ours = std::panic::AssertUnwindSafe(ours);
    // SAFETY: as `attempt`; a re-raised error unwinds from the catch
    // handler once the subtransaction, memory context and resource owner
    // are back as they were before it began.
    let result = unsafe {
        let context = pg_sys::CurrentMemoryContext;
        let owner = pg_sys::CurrentResourceOwner;
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(context);
        PgTryBuilder::new(move || {
            let result = body();
            pg_sys::ReleaseCurrentSubTransaction();
            pg_sys::MemoryContextSwitchTo(context);
            pg_sys::CurrentResourceOwner = owner;
            Some(result)
        })
        .catch_others(move |caught| {
            pg_sys::MemoryContextSwitchTo(context);
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
            pg_sys::MemoryContextSwitchTo(context);
            pg_sys::CurrentResourceOwner = owner;
            let coded = match &caught {
                CaughtError::PostgresError(report) | CaughtError::ErrorReport(report) => {
                    report.sql_error_code() == code
                }
                CaughtError::RustPanic { .. } => false,
            };
            if coded && ask(&ours) {
                None
            } else {
                caught.rethrow()
            }
        })
        .execute()
    };
    drop(outer);
    result
}

/// Call the `ours` of [`attempt_unless`] (a function of its own, so that
/// the catch handler captures the whole wrapper, not its field).
fn ask(ours: &std::panic::AssertUnwindSafe<impl Fn() -> bool>) -> bool {
    (ours.0)()
}

thread_local! {
    /// Whether the transaction around the [`attempt_unless`] running now
    /// was in a transaction block (`None`: none is running).
    static OUTER_BLOCK: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Records the block state for [`attempt_unless`]; restored when dropped
/// (on every way out, an unwinding error included).
struct OuterBlock(Option<bool>);

impl OuterBlock {
    fn enter() -> OuterBlock {
        let previous = OUTER_BLOCK.get();
        OUTER_BLOCK.set(Some(in_transaction_block()));
        OuterBlock(previous)
    }
}

impl Drop for OuterBlock {
    fn drop(&mut self) {
        OUTER_BLOCK.set(self.0);
    }
}

/// Whether the call runs in a transaction block (`BEGIN` ... `COMMIT`),
/// as `IsTransactionBlock` says, except inside [`attempt_unless`], whose
/// own subtransaction `IsTransactionBlock` would count as one: there, what
/// it said for the transaction around it (the local-shard fast path of a
/// Citus call decides on it, `crate::store::local_shard`).
pub fn in_transaction_block() -> bool {
    // SAFETY: backend state.
    OUTER_BLOCK.get().unwrap_or_else(|| unsafe { pg_sys::IsTransactionBlock() })
}

/// Run `body` with `settings` (name, value) in force, restoring the
/// previous values afterwards (also when `body` raises: the enclosing
/// (sub)transaction's abort pops the nesting level).
pub fn with_settings<R>(settings: &[(&str, &str)], body: impl FnOnce() -> R) -> R {
    // SAFETY: NewGUCNestLevel/AtEOXact_GUC bracket settings made with
    // GUC_ACTION_SAVE, as PostgreSQL's own code does (ri_triggers.c,
    // functioncmds.c).
    unsafe {
        let level = pg_sys::NewGUCNestLevel();
        for (name, value) in settings {
            set_for_level(name, value);
        }
        let result = body();
        pg_sys::AtEOXact_GUC(true, level);
        result
    }
}

/// Change a setting again inside the `body` of [`with_settings`] (which
/// named it): the new value is restored with the others when `body` ends.
pub fn set_for_level(name: &str, value: &str) {
    let name = CString::new(name).expect("setting names have no NUL");
    let value = CString::new(value).expect("setting values have no NUL");
    // SAFETY: as in with_settings: GUC_ACTION_SAVE records the value to
    // restore at the current nesting level (once per level); the C strings
    // outlive the call.
    unsafe {
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
}

#[cfg(test)]
mod tests {
    use super::Failure;
    use pgrx::PgSqlErrorCode;

    #[test]
    fn a_failure_names_its_sqlstate_as_postgresql_prints_it() {
        let code = |sqlstate| Failure { sqlstate, message: String::new() }.code();
        assert_eq!(code(PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE), "55P03");
        assert_eq!(code(PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE), "40001");
        assert_eq!(code(PgSqlErrorCode::ERRCODE_QUERY_CANCELED), "57014");
    }
}
