//! Maintenance's archive step (`webhook_dedup.archive`): day partitions
//! made ahead and dropped whole past the longest payload retention
//! ([`crate::archive::plan`]); rows that arrived in the default partition
//! moved to their day's (or deleted, past retention); and the rows of each
//! source whose payload retention is shorter than the longest deleted in
//! paced batches of `webhook_dedup.batch_size`, oldest first. Single-server
//! only: on a distributed install nothing is archived (docs/distributed.md).

use super::{Counts, Retention};
use crate::archive;
use crate::spi;
use crate::store::archive as store;
use crate::time::duration_us;

pub(super) fn run(now: i64, batch: i64, retention: &Retention, counts: &mut Counts) {
    if crate::citus::keys_distributed() {
        return;
    }
    let default_retention = super::retention::interval(retention.default_us);
    spi::connected(|conn| {
        let longest = store::longest_retention(conn, default_retention);
        let longest_us = longest
            .map(|i| duration_us(i, "webhook_dedup.sources.payload_retention").unwrap_or(retention.default_us))
            .unwrap_or(0);
        let exist: Vec<i64> = store::partitions(conn).iter().filter_map(|n| archive::partition_day(n)).collect();
        let cutoff = now.saturating_sub(longest_us);
        let in_default: Vec<i64> = store::default_days(conn, cutoff).into_iter().map(archive::day_of).collect();
        let plan = archive::plan(now, &exist, &in_default, longest_us);
        for day in plan.create {
            store::create_partition(day);
            counts.partitions_created += 1;
        }
        for day in plan.drop {
            store::drop_partition(day);
            counts.partitions_dropped += 1;
        }
        let expired = store::expire_default(conn, plan.default_cutoff, batch);
        counts.payloads_pruned += expired;
        counts.more |= expired >= batch;
        if let Some(longest) = longest {
            for (source, kept) in store::sources_to_prune(conn, default_retention, longest) {
                let Ok(kept_us) = duration_us(kept, "webhook_dedup.sources.payload_retention") else { continue };
                let removed = store::prune_source(conn, &source, now.saturating_sub(kept_us), batch);
                counts.payloads_pruned += removed;
                counts.more |= removed >= batch;
            }
        }
    });
}
