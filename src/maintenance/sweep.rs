//! The lease sweep: a `processing` key whose lease expired and that nobody
//! reclaimed becomes `failed`, due at once (or `dead_lettered` when its
//! attempt was the last allowed), so that views, alerts and `webhook_next`
//! see it although its provider may never retry. The decision is the one
//! `webhook_fail` makes for a retryable failure with no wait
//! ([`crate::claim::decide_fail`]); the write is `webhook_fail`'s.
//!
//! A swept key's holder is fenced out: its token no longer completes the
//! key (`webhook_complete` returns false), exactly as after a reclaim. A
//! holder that needs longer must extend its lease in time.

use super::Counts;
use crate::claim::{decide_fail, FailTo, State};
use crate::metrics::{self, Counter};
use crate::spi;
use crate::store::{self, sources};

/// Sweep up to `batch` leases expired at `now`, oldest expiry first. A key
/// whose row is locked right now (a claim or its holder is on it) is left
/// for the next pass.
pub(super) fn run(now: i64, batch: i64, counts: &mut Counts) {
    let mut counted: Vec<(String, Option<String>, Counter)> = Vec::new();
    spi::connected(|conn| {
        let expired = store::expiry::expired_leases(conn, now, batch);
        counts.more |= expired.len() as i64 >= batch;
        for found in expired {
            let expired_at = found.lease_expires_at.expect("an expired lease has an expiry");
            let error = crate::claim::swept_error(found.attempt, expired_at);
            let max_attempts = sources::settings(conn, &found.source).max_attempts();
            let (state, next_attempt_at) = match decide_fail(found.attempt, true, Some(0), max_attempts, now) {
                FailTo::Failed { next_attempt_at } => (State::Failed, Some(next_attempt_at)),
                FailTo::DeadLettered => (State::DeadLettered, None),
            };
            store::transitions::fail(conn, found.key(), now, state, next_attempt_at, Some(&error));
            counted.push((found.source.clone(), found.event_type.clone(), Counter::ExpiredLeases));
            if state == State::DeadLettered {
                counts.dead_lettered += 1;
                counted.push((found.source, found.event_type, Counter::DeadLetters));
            } else {
                counts.leases_expired += 1;
            }
        }
    });
    for (source, event_type, counter) in &counted {
        metrics::count(source, event_type.as_deref(), *counter, false);
    }
}
