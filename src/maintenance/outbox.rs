//! Maintenance's outbox step: sender leases that lapsed are taken back as
//! `webhook_outbox_next` would decide them ([`crate::outbox::lapsed`]:
//! failed and due at once, dead-lettered out of attempts, or parked as
//! `unknown_outcome` when the downstream is not idempotent), and delivered
//! intents past their source's retention are deleted, oldest first.
//! Undelivered intents are never deleted. Rows a sender holds right now
//! are skipped (`SKIP LOCKED`), never waited for.

use super::{Counts, Retention};
use crate::claim::{self, State};
use crate::metrics::{self, Counter};
use crate::outbox::{self, Lapsed};
use crate::spi;
use crate::store::{outbox as store, sources};

pub(super) fn run(now: i64, batch: i64, retention: &Retention, counts: &mut Counts) {
    if crate::citus::keys_distributed() {
        return; // the outbox is single-server (docs/outbox.md, "Limits")
    }
    let mut counted: Vec<(String, Counter)> = Vec::new();
    spi::connected(|conn| {
        let lapsed = store::lapsed(conn, now, batch);
        counts.more |= lapsed.len() as i64 >= batch;
        for found in lapsed {
            let max_attempts = sources::settings(conn, &found.source).max_attempts();
            counted.push((found.source.clone(), Counter::IntentLeasesExpired));
            counts.intents_expired += 1;
            match outbox::lapsed(found.attempt, max_attempts, found.downstream_idempotent, now) {
                Lapsed::Failed { next_attempt_at } => {
                    let error = outbox::lapsed_error(found.attempt);
                    store::set_state(conn, found.id, now, State::Failed, Some(next_attempt_at), Some(&error));
                }
                Lapsed::DeadLettered => {
                    let error = claim::exhausted_error(found.attempt);
                    store::set_state(conn, found.id, now, State::DeadLettered, None, Some(&error));
                    counted.push((found.source, Counter::IntentsDeadLettered));
                }
                Lapsed::UnknownOutcome => {
                    let error = outbox::parked_error(found.attempt);
                    store::set_state(conn, found.id, now, State::UnknownOutcome, None, Some(&error));
                    counted.push((found.source, Counter::IntentsUnknown));
                }
            }
        }
        let pruned = store::prune(conn, now, retention.default_us, retention.shortest_us, batch);
        counts.intents_pruned += pruned;
        counts.more |= pruned >= batch;
    });
    for (source, counter) in &counted {
        metrics::count(source, None, *counter, false);
    }
}
