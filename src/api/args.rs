//! Argument checks shared by the SQL functions (each raises a precise
//! SQLSTATE; see [`crate::error`]).

use crate::error::{required, Error, OrRaise, Raise};
use crate::jsonb::Jsonb;
use crate::key::check_bounded;
use crate::signature::{Algorithm, Encoding, Headers, HmacSpec, Scheme};
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
    if crate::citus::keys_distributed() {
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

/// The optional arguments of the generic scheme, as SQL passes them.
pub(crate) struct HmacArgs<'a> {
    pub header: Option<&'a str>,
    pub prefix: Option<&'a str>,
    pub algorithm: Option<&'a str>,
    pub encoding: Option<&'a str>,
}

impl HmacArgs<'_> {
    pub const NONE: HmacArgs<'static> = HmacArgs { header: None, prefix: None, algorithm: None, encoding: None };

    /// The spec for scheme `hmac` (`None` when `signature_header` is
    /// missing: the verifier reports it). Any of these arguments given to
    /// another scheme is 22023 rather than silently ignored.
    pub fn spec(&self, scheme: Scheme) -> Result<Option<HmacSpec>, Error> {
        let given =
            self.header.is_some() || self.prefix.is_some() || self.algorithm.is_some() || self.encoding.is_some();
        if scheme != Scheme::Hmac {
            return if given {
                Err(Error::invalid(format!(
                    "signature_header, signature_prefix, algorithm and encoding apply only to scheme hmac, not {}",
                    scheme.name()
                )))
            } else {
                Ok(None)
            };
        }
        let Some(header) = self.header else {
            return Ok(None);
        };
        let algorithm = match self.algorithm {
            None => Algorithm::Sha256,
            Some(name) => Algorithm::parse(name).ok_or_else(|| unknown_algorithm(name))?,
        };
        let encoding = match self.encoding {
            None => Encoding::Hex,
            Some(name) => Encoding::parse(name)
                .ok_or_else(|| Error::invalid(format!("unknown encoding \"{name}\" (hex or base64)")))?,
        };
        Ok(Some(HmacSpec {
            header: header.to_string(),
            prefix: self.prefix.unwrap_or("").to_string(),
            algorithm,
            encoding,
        }))
    }
}

pub(crate) fn unknown_algorithm(name: &str) -> Error {
    Error::invalid(format!("unknown HMAC algorithm \"{name}\" (sha1, sha256 or sha512)"))
}

/// The request headers of a call: a JSON object of names and a string or
/// an array of strings each (22004 NULL, 22023 otherwise).
pub(crate) fn header_map(headers: Option<Jsonb>) -> Headers {
    let members = required(headers, "headers").string_members().map_err(Error::from).or_raise();
    Headers::from_members(members)
}
