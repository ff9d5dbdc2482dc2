//! Argument checks shared by the SQL functions (each raises a precise
//! SQLSTATE; see [`crate::error`]).

use crate::error::{required, OrRaise, Raise};
use crate::key::check_bounded;
use crate::store::Key;
use pgrx::datum::Interval;

/// The key named by a call: both parts present (22004) and 1 to 255
/// characters (22023).
pub(crate) fn key<'a>(source: Option<&'a str>, idem_key: Option<&'a str>) -> Key<'a> {
    let source = required(source, "source");
    let idem_key = required(idem_key, "idem_key");
    crate::key::check_source(source).or_raise();
    check_bounded("idem_key", idem_key).or_raise();
    Key { source, idem_key }
}

/// A lease length given as an interval: positive, at most 365 days, no
/// months (22023 otherwise). Microseconds.
pub(crate) fn lease(lease: Interval) -> i64 {
    crate::time::duration_us(lease, "lease").and_then(crate::claim::check_lease_us).or_raise()
}

/// 0A000 on a distributed (Citus) install, for `what` runs on one server
/// only (the outbox, pausing a source, the payload archive: not yet on Citus);
/// `hint` names the document that says so.
pub fn one_server_only(what: &str, hint: &str) {
    if crate::store::citus::keys_distributed() {
        crate::error::Error::FeatureNotSupported {
            message: format!("{what} is not available on a distributed (Citus) install of webhook_dedup"),
            hint: Some(hint.into()),
        }
        .raise();
    }
}

/// The login that called (`session_user`: under SECURITY DEFINER the
/// current user is the extension's owner), as recorded by the operator
/// functions that say who did what (pause, redact).
pub(crate) fn session_user() -> String {
    // SAFETY: a catalog look-up of the session's own role, which exists
    // (noerr = false would raise otherwise); the name is copied out.
    unsafe {
        let name = pgrx::pg_sys::GetUserNameFromId(pgrx::pg_sys::GetSessionUserId(), false);
        std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned()
    }
}
