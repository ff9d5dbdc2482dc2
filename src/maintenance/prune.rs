//! Pruning history past retention: watermarks, replay guards, signed
//! tokens, conflicts, claim counts and maintenance runs, a bounded batch per table and pass (keys are
//! [`super::expiry`]'s).
//!
//! The statements are the store's: the history tables'
//! ([`crate::store::history::prune`]: one statement on one server, source by
//! source on a distributed install), then, either way, this node's
//! maintenance runs ([`crate::store::maintenance_runs::prune`]).

use super::{Counts, Retention};
use crate::spi;
use crate::store::{history, maintenance_runs};

/// Delete up to `batch` rows of each history table past retention.
pub(super) fn history(now: i64, batch: i64, retention: &Retention, pass: &mut Counts) {
    spi::connected(|conn| {
        let mut add = |pruned: i64| {
            pass.history_pruned += pruned;
            pass.more |= pruned >= batch;
        };
        let pruned = history::prune(conn, now, retention.default_us, retention.shortest_us, batch);
        pruned.per_table().into_iter().for_each(&mut add);
        add(maintenance_runs::prune(conn, now, retention.default_us, batch));
    });
}
