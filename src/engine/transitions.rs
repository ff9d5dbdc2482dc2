//! The transitions after a claim: by the lease holder (fail, mark unknown,
//! checkpoint, extend the lease) and by an operator (resolve, forget).
//! Each locks the key's row ([`crate::store::transitions::lock`]), decides
//! on what it read ([`crate::claim`]), writes once, wakes the key's
//! waiters at commit where the state changed, and counts.

use crate::claim::{self, FailTo, State};
use crate::error::{Error, Raise};
use crate::jsonb::Jsonb;
use crate::metrics::{self, Counter};
use crate::spi::{self, Conn};
use crate::store::sources::{self, SourceSettings};
use crate::store::transitions::{self as write, Resolution};
use crate::store::{Key, KeyRow};
use crate::time::clock_now;
use pgrx::Uuid;

/// The key named by a call, locked: P0002 when it does not exist.
pub(crate) fn existing(conn: &Conn<'_>, key: Key<'_>) -> KeyRow {
    write::lock(conn, key).unwrap_or_else(|| Error::unknown_key(key.source, key.idem_key).raise())
}

/// A call by the holder of `token`: lock the key, read it (P0002 when
/// unknown) and run `body` only if `token` holds its lease. `None` (and a
/// `stale_tokens` count) when it does not: nothing changes.
fn as_holder<R>(
    key: Key<'_>,
    token: Uuid,
    body: impl FnOnce(&Conn<'_>, &KeyRow, &SourceSettings, i64) -> (R, Option<Counter>),
) -> Option<R> {
    let (result, counter, label) = spi::connected(|conn| {
        let found = existing(conn, key);
        let now = clock_now();
        if !found.held_by(&token) {
            return (None, Some(Counter::StaleTokens), found.event_type);
        }
        let settings = sources::settings(conn, key.source);
        let (result, counter) = body(conn, &found, &settings, now);
        (Some(result), counter, found.event_type)
    });
    if let Some(counter) = counter {
        metrics::count(key.source, label.as_deref(), counter, false);
    }
    result
}

/// `webhook_fail`: the key's new state (`failed`, due again after
/// `retry_after_us` or the backoff, or `dead_lettered` when not retryable
/// or out of attempts), None for a stale token.
pub fn fail(
    key: Key<'_>,
    token: Uuid,
    retryable: bool,
    retry_after_us: Option<i64>,
    error: Option<&str>,
) -> Option<State> {
    as_holder(key, token, |conn, found, settings, now| {
        let to = claim::decide_fail(found.attempt, retryable, retry_after_us, settings.max_attempts(), now);
        let (state, next, counter) = match to {
            FailTo::Failed { next_attempt_at } => (State::Failed, Some(next_attempt_at), Counter::RetriesScheduled),
            FailTo::DeadLettered => (State::DeadLettered, None, Counter::DeadLetters),
        };
        write::fail(conn, key, now, state, next, error);
        crate::wait::wake_at_commit(key);
        (state, Some(counter))
    })
}

/// `webhook_mark_unknown`: true when the holder's key is now
/// `unknown_outcome`, false for a stale token.
pub fn mark_unknown(key: Key<'_>, token: Uuid, detail: Option<&str>) -> bool {
    as_holder(key, token, |conn, _, _, now| {
        write::mark_unknown(conn, key, now, detail);
        crate::wait::wake_at_commit(key);
        ((), Some(Counter::MarkedUnknown))
    })
    .is_some()
}

/// `webhook_checkpoint`: true when `step` is recorded, false for a stale
/// token.
pub fn checkpoint(key: Key<'_>, token: Uuid, step: &str) -> bool {
    as_holder(key, token, |conn, _, _, now| {
        write::checkpoint(conn, key, now, step);
        ((), None)
    })
    .is_some()
}

/// `webhook_extend_lease`: the new expiry (microseconds since 2000),
/// `lease_us` from now; None for a stale token.
pub fn extend_lease(key: Key<'_>, token: Uuid, lease_us: i64) -> Option<i64> {
    as_holder(key, token, |conn, _, _, now| {
        let until = now.saturating_add(lease_us);
        write::extend_lease(conn, key, now, until);
        (until, None)
    })
}

/// `webhook_resolve`: the key moved to `to` (checked by
/// [`claim::check_resolve_target`]), its holder fenced out; returns the
/// previous state. P0002 for an unknown key.
pub fn resolve(key: Key<'_>, to: State, result: Option<Jsonb>) -> State {
    let (previous, label) = spi::connected(|conn| {
        let found = existing(conn, key);
        let now = clock_now();
        let due_at = matches!(to, State::Failed | State::Pending).then_some(now);
        let expires_at =
            (to == State::Completed).then(|| now.saturating_add(sources::settings(conn, key.source).retention_us()));
        write::resolve(conn, key, &Resolution { now, to, result, due_at, expires_at });
        crate::wait::wake_at_commit(key);
        (found.state, found.event_type)
    });
    metrics::count(key.source, label.as_deref(), Counter::Resolved, false);
    if to == State::DeadLettered && previous != State::DeadLettered {
        metrics::count(key.source, label.as_deref(), Counter::DeadLetters, false);
    }
    previous
}

/// `webhook_forget`: true when the key existed (now removed).
pub fn forget(key: Key<'_>) -> bool {
    match spi::connected(|conn| write::forget(conn, key)) {
        Some(label) => {
            crate::wait::wake_at_commit(key);
            metrics::count(key.source, label.as_deref(), Counter::Forgotten, false);
            true
        }
        None => false,
    }
}
