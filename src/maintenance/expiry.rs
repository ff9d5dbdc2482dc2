//! Retention of keys: completed keys whose `expires_at` has come are
//! deleted with their payloads, in batches, oldest first; those active
//! since (a late duplicate) or whose source's retention grew are looked at
//! again when their retention ends. Keys in any other state never expire:
//! they are work not done, or wait for an operator.
//!
//! Deleting row by row costs WAL and vacuum that dropping a partition
//! would not; `docs/design.md` ("Storage") has the measurements that made
//! this the layout, and `docs/benchmarks.md` the cost per key.

use super::{Counts, Retention};
use crate::spi;
use crate::store;

/// Delete (or reschedule) up to `batch` completed keys whose `expires_at`
/// is at or before `now`.
pub(super) fn run(now: i64, batch: i64, retention: &Retention, counts: &mut Counts) {
    let expired = spi::connected(|conn| store::expiry::expire_keys(conn, now, retention.default_us, batch));
    counts.keys_pruned += expired.deleted;
    counts.keys_kept += expired.kept;
    counts.more |= expired.looked_at >= batch;
}
