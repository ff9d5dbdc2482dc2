//! The payload archive's SQL surface (docs/operations.md "The payload
//! archive"): the operator's erasure, `webhook_dedup.redact`; what the
//! intake functions archive is [`crate::engine::archive`]'s.
//!
//! The rules:
//!
//! - A source with `keep_payload` archives the raw body and headers of each
//!   key's first delivery (the content it was processed with) and of each
//!   conflicting delivery, in the caller's transaction (a claim rolled back
//!   archives nothing). Duplicates, replays and refused deliveries are not
//!   archived: the first copy is.
//! - `redact` erases what a key's deliveries carried (the archived bodies
//!   and headers, the payload kept for the workers, the stored result and
//!   the last error) and keeps the key itself (dead-lettering a key that
//!   waited for a worker with the payload erased), so that a later delivery of
//!   the same event is still answered from its state (duplicate, conflict)
//!   instead of being processed again (GDPR Art. 17 erasure without
//!   re-processing). Who and when are recorded on the key
//!   (`redacted_by`, `redacted_at`, shown by `key_history`).

#[pgrx::pg_schema]
mod webhook_dedup {
    use crate::error::{required, Error, OrRaise, Raise};
    use crate::spi;
    use crate::store::archive::{self, RedactScope};
    use crate::time::{clock_now, micros};
    use pgrx::datum::TimestampWithTimeZone;
    use pgrx::prelude::*;

    /// Erase what the deliveries of some keys of `source` carried, keeping
    /// the keys: exactly one scope of
    ///
    /// - `idem_key`: that key (its archived deliveries even when the key
    ///   itself is gone);
    /// - `before`: every key first seen before that time, and every
    ///   delivery of the source archived before it;
    /// - `account`: every key derived with that account
    ///   (`webhook_key(..., account => ...)`, `webhook_receive(account =>
    ///   ...)`; a key over 255 characters whose account field was cut by
    ///   the bound is not found: redact it by key).
    ///
    /// Each key's `result` and `last_error` become NULL and
    /// `redacted_at`/`redacted_by` (the session user) are set; its payload
    /// for the workers and its archived bodies and headers are deleted. The
    /// key's state, fingerprint and times stay, so duplicates and conflicts
    /// are still answered from it; but a key waiting for a worker
    /// (`pending`, or `failed` with its payload queued) cannot be processed
    /// without its payload: it becomes `dead_lettered` (`last_error` says
    /// why), never handed out empty. One row: `keys` redacted and `deliveries`
    /// erased. For operators. Errors: 22004 NULL source; 22023 a bad
    /// source, not exactly one scope, an empty key or account, an infinite
    /// `before`; 0A000 on a distributed install.
    #[pg_extern(volatile, parallel_unsafe)]
    fn redact(
        source: Option<&str>,
        idem_key: default!(Option<&str>, "NULL"),
        before: default!(Option<TimestampWithTimeZone>, "NULL"),
        account: default!(Option<&str>, "NULL"),
    ) -> TableIterator<'static, (name!(keys, i64), name!(deliveries, i64))> {
        let source = required(source, "source");
        crate::key::check_source(source).or_raise();
        let scopes = usize::from(idem_key.is_some()) + usize::from(before.is_some()) + usize::from(account.is_some());
        if scopes != 1 {
            Error::invalid("redact takes exactly one of idem_key, before and account").raise();
        }
        crate::api::args::one_server_only("redaction", "docs/operations.md, \"Erasing payloads\".");
        let by = crate::api::args::session_user();
        let now = clock_now();
        if let Some(idem_key) = idem_key {
            crate::key::check_bounded("idem_key", idem_key).or_raise();
        }
        let before = before.map(|b| micros(b, "before").or_raise());
        let account = account.map(|a| {
            if a.is_empty() {
                Error::invalid("account must not be empty").raise();
            }
            crate::key::escape_part(a)
        });
        let scope = match (idem_key, before, account.as_deref()) {
            (Some(idem_key), _, _) => RedactScope::Key(idem_key),
            (_, Some(before), _) => RedactScope::Before(before),
            (_, _, Some(account)) => RedactScope::Account(account),
            (None, None, None) => unreachable!("exactly one scope was checked"),
        };
        let redacted = spi::connected(|conn| archive::redact(conn, source, scope, now, by.as_str()));
        TableIterator::once((redacted.keys, redacted.deliveries))
    }
}
