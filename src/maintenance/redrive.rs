//! Maintenance's redrive step: the keys of each running bulk redrive
//! (`webhook_dedup.redrive`) moved back to due, `webhook_dedup.batch_size`
//! per pass across runs, oldest run first. For each key, under its row
//! lock:
//!
//! - held by someone right now (a live delivery's claim, its holder, a
//!   worker): left for the next pass, never waited for;
//! - gone, or no longer as matched (a live delivery or an operator got
//!   there first: it is being or was processed; a conflict whose content
//!   the key has already): skipped, so no key is processed twice because of
//!   a redrive;
//! - without a payload for `webhook_next` (redacted; or not in the queue's
//!   payloads, and its archived delivery past its payload retention or
//!   never archived): skipped as `no_payload`; a worker could do nothing
//!   with it;
//! - else its payload is in the queue (copied from the archive when the key
//!   was claimed, not enqueued) and it becomes `pending`, due now, with the
//!   run on its row (`redriven_at`, `redrive_run`): `webhook_next` hands it
//!   out, and a live delivery that comes first claims it instead, once.
//!
//! A paused source's runs wait for its resume. Finished runs are pruned
//! after their source's retention. Single-server (the archive is).

use super::{Counts, Retention};
use crate::spi;
use crate::store::redrive::{self as store, Found};
use crate::store::{sources, Key};

pub(super) fn run(now: i64, batch: i64, retention: &Retention, counts: &mut Counts) {
    if crate::citus::keys_distributed() {
        return;
    }
    spi::connected(|conn| {
        let mut budget = batch;
        for run in store::running(conn) {
            if budget <= 0 {
                counts.more = true;
                break;
            }
            if sources::paused_locked(conn, &run.source) {
                continue;
            }
            let limit = budget;
            let items = store::todo(conn, run.id, limit);
            let (mut moved, mut skipped) = (0, 0);
            for item in &items {
                let key = Key { source: &run.source, idem_key: &item.idem_key };
                let outcome = match store::lock(conn, key, item.conflict_at) {
                    Found::Held => continue,
                    Found::Gone => "gone",
                    Found::Locked { state, first_seen_at, queued, redacted, done } => {
                        let as_matched = match item.conflict_at {
                            None => run.states.contains(&state),
                            // a conflict's key is moved from a settled state
                            // only (not while pending or processing, taken by
                            // a live delivery, a worker or another run; not
                            // unknown_outcome, whose effect may have
                            // happened), and once: not when it has the
                            // conflict's content already
                            Some(_) => matches!(state.as_str(), "completed" | "dead_lettered" | "failed") && !done,
                        };
                        if !as_matched {
                            "changed"
                        } else if redacted {
                            // erased: nothing to process it with
                            "no_payload"
                        } else if match item.conflict_at {
                            Some(at) => store::copy_payload(conn, key, at, true),
                            None => queued || store::copy_payload(conn, key, first_seen_at, false),
                        } {
                            store::move_key(conn, key, now, run.id, item.conflict_at);
                            "moved"
                        } else {
                            "no_payload"
                        }
                    }
                };
                store::outcome(conn, run.id, item.n, outcome);
                if outcome == "moved" {
                    moved += 1;
                } else {
                    skipped += 1;
                }
            }
            budget -= items.len() as i64;
            store::progress(conn, run.id, moved, skipped, now);
            counts.keys_redriven += moved + skipped;
            counts.more |= items.len() as i64 >= limit;
        }
        let pruned = store::prune(conn, now, super::retention::interval(retention.default_us), batch);
        counts.history_pruned += pruned;
    });
}
