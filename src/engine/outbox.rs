//! The transactional outbox's paths (`docs/outbox.md`): an intent written
//! by a key's holder, due intents handed to senders, and the senders' and
//! operators' transitions, with their counts. Decisions are
//! [`crate::outbox`]'s and [`crate::claim`]'s; reads and writes
//! [`crate::store::outbox`]'s. The SQL surface checks that the install is
//! not distributed before it calls any of them.

use crate::claim::{self, FailTo, State};
use crate::error::{Error, Raise};
use crate::jsonb::Jsonb;
use crate::metrics::{self, Counter};
use crate::outbox::{self, Take};
use crate::spi::{self, Conn};
use crate::store::outbox::{self as store, Intent, IntentRow, Put};
use crate::store::sources;
use crate::time::clock_now;
use pgrx::Uuid;

/// The intent named by a call, locked: P0002 when it does not exist.
fn existing(conn: &Conn<'_>, id: i64) -> IntentRow {
    store::lock(conn, id)
        .unwrap_or_else(|| Error::NoDataFound { message: format!("no outbox intent with id {id}") }.raise())
}

/// `webhook_outbox_put`: the intent's id (the operation's first intent's
/// when it has one), None for a stale token; P0002 for an unknown key.
pub fn put(conn: &Conn<'_>, intent: &Intent<'_>) -> Option<i64> {
    let key = intent.key;
    match store::put(conn, intent) {
        Put::Written(id) => {
            metrics::count(key.source, None, Counter::IntentsWritten, false);
            Some(id)
        }
        Put::Existing(id) => Some(id),
        Put::Stale => {
            metrics::count(key.source, None, Counter::StaleTokens, false);
            None
        }
        Put::UnknownKey => Error::unknown_key(key.source, key.idem_key).raise(),
    }
}

/// One intent handed out by `webhook_outbox_next`: id, lease token,
/// downstream key, target, operation, request, attempt, lease expiry
/// (microseconds since 2000), source, idem key, downstream idempotent.
pub type NextRow = (i64, Uuid, String, String, String, Option<Jsonb>, i32, i64, String, String, bool);

/// `webhook_outbox_next`: up to `batch` due intents (of `target`, or of
/// every target) leased for `lease_us` (None: the source's lease); those
/// out of attempts dead-lettered, lapsed ones of a downstream that is not
/// idempotent parked. The counts are made once the statements ran.
pub fn next(target: Option<&str>, lease_us: Option<i64>, batch: i32) -> Vec<NextRow> {
    let mut counts: Vec<(String, Counter)> = Vec::new();
    let rows: Vec<NextRow> = spi::connected(|conn| {
        let now = clock_now();
        let mut out = Vec::with_capacity(batch as usize);
        for found in store::take_due(conn, now, target, batch) {
            let settings = sources::settings(conn, &found.source);
            let lapsed = found.state == State::Processing;
            match outbox::take(&found.stored(), now, settings.max_attempts(), found.downstream_idempotent) {
                Take::Lease { attempt, .. } => {
                    let token = crate::store::new_token();
                    let until = now.saturating_add(lease_us.unwrap_or_else(|| settings.default_lease_us()));
                    store::lease(conn, found.id, attempt, token, until, now);
                    if lapsed {
                        counts.push((found.source.clone(), Counter::IntentLeasesExpired));
                    }
                    out.push((
                        found.id,
                        token,
                        found.downstream_key,
                        found.target,
                        found.operation,
                        found.request,
                        attempt,
                        until,
                        found.source,
                        found.idem_key,
                        found.downstream_idempotent,
                    ));
                }
                Take::DeadLetter => {
                    store::set_state(
                        conn,
                        found.id,
                        now,
                        State::DeadLettered,
                        None,
                        Some(&claim::exhausted_error(found.attempt)),
                    );
                    if lapsed {
                        counts.push((found.source.clone(), Counter::IntentLeasesExpired));
                    }
                    counts.push((found.source, Counter::IntentsDeadLettered));
                }
                Take::Park => {
                    store::set_state(
                        conn,
                        found.id,
                        now,
                        State::UnknownOutcome,
                        None,
                        Some(&outbox::parked_error(found.attempt)),
                    );
                    counts.push((found.source.clone(), Counter::IntentLeasesExpired));
                    counts.push((found.source, Counter::IntentsUnknown));
                }
                // its due_at and its state disagree (an edit by hand): not
                // handed out; an operator resolves it
                Take::NotDue => {}
            }
        }
        out
    });
    for (source, counter) in &counts {
        metrics::count(source, None, *counter, false);
    }
    rows
}

/// Lock the intent, check that `token` holds its lease, and run `body`:
/// `None` (and a `stale_tokens` count) when it does not. P0002 when the
/// intent does not exist.
fn as_sender<R>(id: i64, token: Uuid, body: impl FnOnce(&Conn<'_>, &IntentRow, i64) -> (R, Counter)) -> Option<R> {
    let (result, source, counter) = spi::connected(|conn| {
        let found = existing(conn, id);
        if !found.held_by(&token) {
            return (None, found.source, Counter::StaleTokens);
        }
        let (result, counter) = body(conn, &found, clock_now());
        (Some(result), found.source, counter)
    });
    metrics::count(&source, None, counter, false);
    result
}

/// `webhook_outbox_ack`: true when `token` held the intent's lease (now
/// `completed` with `response`), false for a stale token; P0002 for an
/// unknown intent.
pub fn ack(id: i64, token: Uuid, response: Option<Jsonb>) -> bool {
    let (source, counter) = spi::connected(|conn| match store::ack(conn, id, token, response, clock_now()) {
        Some(source) => (source, Counter::IntentsDelivered),
        // nothing matched: unknown (P0002), or a stale token
        None => (existing(conn, id).source, Counter::StaleTokens),
    });
    metrics::count(&source, None, counter, false);
    counter == Counter::IntentsDelivered
}

/// `webhook_outbox_fail`: the intent's new state (`failed`, due again
/// after `retry_after_us` or the backoff, or `dead_lettered`), None for a
/// stale token.
pub fn fail(id: i64, token: Uuid, retryable: bool, retry_after_us: Option<i64>, error: Option<&str>) -> Option<State> {
    as_sender(id, token, |conn, found, now| {
        let max_attempts = sources::settings(conn, &found.source).max_attempts();
        let (state, next, counter) =
            match claim::decide_fail(found.attempt, retryable, retry_after_us, max_attempts, now) {
                FailTo::Failed { next_attempt_at } => (State::Failed, Some(next_attempt_at), Counter::IntentRetries),
                FailTo::DeadLettered => (State::DeadLettered, None, Counter::IntentsDeadLettered),
            };
        store::set_state(conn, found.id, now, state, next, error);
        (state, counter)
    })
}

/// `webhook_outbox_unknown`: true when the intent is now
/// `unknown_outcome`, false for a stale token.
pub fn unknown(id: i64, token: Uuid, detail: Option<&str>) -> bool {
    as_sender(id, token, |conn, found, now| {
        store::set_state(conn, found.id, now, State::UnknownOutcome, None, detail);
        ((), Counter::IntentsUnknown)
    })
    .is_some()
}

/// `webhook_outbox_resolve`: the intent moved to `to` (checked by
/// [`claim::check_resolve_target`]), its sender fenced out; returns the
/// previous state. P0002 for an unknown intent.
pub fn resolve(id: i64, to: State, response: Option<Jsonb>) -> State {
    let (previous, source) = spi::connected(|conn| {
        let found = existing(conn, id);
        let now = clock_now();
        let due_at = matches!(to, State::Failed | State::Pending).then_some(now);
        store::resolve(conn, id, now, to, response, due_at, outbox::attempt_after_resolve(to, found.attempt));
        (found.state, found.source)
    });
    metrics::count(&source, None, Counter::Resolved, false);
    if to == State::DeadLettered && previous != State::DeadLettered {
        metrics::count(&source, None, Counter::IntentsDeadLettered, false);
    }
    previous
}
