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

use super::Pass;
use crate::api::protocol::{expect_one, lookup, try_lock_key, unlock_key};
use crate::api::transitions::FAIL;
use crate::claim::{decide_fail, FailTo, State};
use crate::metrics::{self, Counter};
use crate::partition::utc_literal;
use crate::spi::{self, arg, Snap, Statement};
use crate::time::timestamptz;
use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys::{INT8OID, TIMESTAMPTZOID};

static EXPIRED: Statement =
    Statement::new(crate::sql_statement!("maintenance_expired_leases.sql"), &[TIMESTAMPTZOID, INT8OID]);

/// Sweep up to `batch` leases expired at `now`, oldest expiry first. A key
/// whose lock is held right now (a claim or its holder is on it) is left
/// for the next pass.
pub(super) fn run(now: i64, batch: i64, pass: &mut Pass) {
    let mut counts: Vec<(String, Option<String>, Counter)> = Vec::new();
    spi::connected(|conn| {
        let expired = conn.execute(&EXPIRED, &[arg(timestamptz(now)), arg(batch)], Snap::Latest);
        pass.more |= expired.len() as i64 >= batch;
        for i in 0..expired.len() {
            let source: String = expired.get(i, 1).expect("source");
            let idem_key: String = expired.get(i, 2).expect("idem_key");
            // Busy right now: left for a later pass (not `more`: waiting
            // for a lock holder is no reason to run again at once).
            if !try_lock_key(&source, &idem_key) {
                continue;
            }
            let (found, settings) = lookup(conn, &source, &idem_key);
            let Some(found) = found else {
                unlock_key(&source, &idem_key);
                continue;
            };
            let s = &found.stored;
            let expired_at = match (s.state, s.lease_expires_at) {
                (State::Processing, Some(at)) if at <= now => at,
                // Completed, failed or reclaimed since the read: not ours.
                _ => {
                    unlock_key(&source, &idem_key);
                    continue;
                }
            };
            let error = format!(
                "lease of attempt {} expired at {} without webhook_complete, webhook_fail or \
                 webhook_extend_lease (swept by maintenance)",
                s.attempt,
                utc_literal(expired_at)
            );
            let (state, next_attempt_at) = match decide_fail(s.attempt, true, Some(0), settings.max_attempts(), now) {
                FailTo::Failed { next_attempt_at } => (State::Failed, Some(timestamptz(next_attempt_at))),
                FailTo::DeadLettered => (State::DeadLettered, None::<TimestampWithTimeZone>),
            };
            expect_one(conn.execute(
                &FAIL,
                &[
                    arg(source.as_str()),
                    arg(idem_key.as_str()),
                    arg(timestamptz(now)),
                    arg(next_attempt_at),
                    arg(state.as_str()),
                    arg(error.as_str()),
                    arg(found.partition_at),
                    arg(0),
                ],
                Snap::Statement,
            ));
            counts.push((source.clone(), found.event_type.clone(), Counter::ExpiredLeases));
            if state == State::DeadLettered {
                pass.dead_lettered += 1;
                counts.push((source, found.event_type, Counter::DeadLetters));
            } else {
                pass.leases_expired += 1;
            }
        }
    });
    for (source, event_type, counter) in &counts {
        metrics::count(source, event_type.as_deref(), *counter, false);
    }
}
