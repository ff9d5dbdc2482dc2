//! Trigger functions that refuse to be called as plain functions.
//!
//! pgrx's `#[pg_trigger]` wrapper unwraps `PgTrigger::from_fcinfo`, so
//! `SELECT webhook_dedup.webhook_monotonic_guard()` panics with XX000
//! (`PgTrigger::from_fcinfo failed: NotTrigger`). A trigger function called
//! outside a trigger is a misuse that deserves its own SQLSTATE, 39P01
//! trigger_protocol_violated (PL/pgSQL refuses the same call with "trigger
//! functions can only be called as triggers"). [`trigger_function!`] makes
//! the C entry point of such a function: it checks the call context first,
//! then hands the trigger to the body; [`call`] is that check, shared by
//! every trigger of the extension. The SQL declaration is written by hand
//! next to each (`extension_sql!`), with the same C symbol the generated
//! wrapper had (`<name>_wrapper`), so that functions created by earlier
//! versions keep resolving after an upgrade.

use crate::error::{Error, Raise};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// The C entry point `$symbol` (with its `pg_finfo_` record `$finfo`) of
/// the trigger function `$name`, whose body is
/// `fn(&PgTrigger) -> Result<Option<PgHeapTuple<..>>, E: Display>`: 39P01
/// when it is not called by a trigger ([`checked`]), else the body's row
/// as the trigger's result (none skips the row's operation; a statement
/// trigger returns none).
#[macro_export]
macro_rules! trigger_function {
    ($name:literal, $symbol:ident, $finfo:ident, $body:path) => {
        #[unsafe(no_mangle)]
        #[doc(hidden)]
        pub extern "C" fn $finfo() -> &'static ::pgrx::pg_sys::Pg_finfo_record {
            const V1_API: ::pgrx::pg_sys::Pg_finfo_record = ::pgrx::pg_sys::Pg_finfo_record { api_version: 1 };
            &V1_API
        }

        /// The C entry point PostgreSQL calls (see `crate::api::trigger`).
        ///
        /// # Safety
        /// Called by PostgreSQL's function manager with a valid `fcinfo`.
        #[unsafe(no_mangle)]
        #[doc(hidden)]
        pub unsafe extern "C-unwind" fn $symbol(fcinfo: ::pgrx::pg_sys::FunctionCallInfo) -> ::pgrx::pg_sys::Datum {
            // SAFETY: the guard turns a Rust panic or a Postgres ERROR raised
            // inside into the ERROR PostgreSQL expects, as pgrx's own
            // wrappers do; fcinfo is the function manager's (contract).
            unsafe {
                ::pgrx::pg_sys::submodules::panic::pgrx_extern_c_guard(move || {
                    let trigger = $crate::api::trigger::checked($name, fcinfo);
                    let datum = match $body(&trigger) {
                        Err(e) => ::pgrx::error!("webhook_dedup: {}: {}", $name, e),
                        // The trigger protocol returns a NULL pointer (never a
                        // NULL datum) to skip the row, as pgrx's wrapper does.
                        Ok(None) => ::pgrx::pg_sys::Datum::from(0),
                        Ok(Some(row)) => row.into_trigger_datum().unwrap_or(::pgrx::pg_sys::Datum::from(0)),
                    };
                    datum
                })
            }
        }
    };
}

/// Whether `fcinfo` is a trigger call (`CALLED_AS_TRIGGER`: its context is
/// a `TriggerData` node).
///
/// # Safety
/// `fcinfo` is null or the valid call info PostgreSQL passed.
unsafe fn called_as_trigger(fcinfo: pg_sys::FunctionCallInfo) -> bool {
    // SAFETY: per the contract; a non-null context is a Node.
    unsafe {
        if fcinfo.is_null() {
            return false;
        }
        let context = (*fcinfo).context;
        !context.is_null() && (*context).type_ == pg_sys::NodeTag::T_TriggerData
    }
}

/// The trigger of the call `fcinfo` to the trigger function `name`, or
/// 39P01 when a trigger did not make the call (`SELECT name()`).
///
/// # Safety
/// `fcinfo` is the valid call info PostgreSQL passed; the trigger borrows
/// it for the call.
pub unsafe fn checked<'a>(name: &str, fcinfo: pg_sys::FunctionCallInfo) -> PgTrigger<'a> {
    // SAFETY: per the contract.
    if !unsafe { called_as_trigger(fcinfo) } {
        Error::TriggerProtocolViolated {
            message: format!("{name}() is a trigger function: it can only be called by a trigger"),
        }
        .raise()
    }
    // SAFETY: a trigger call (checked above): its context is the
    // TriggerData the executor made, valid for the call.
    unsafe { PgTrigger::from_fcinfo(&*fcinfo) }
        .unwrap_or_else(|e| pgrx::error!("webhook_dedup: {name}: reading the trigger call: {e}"))
}
