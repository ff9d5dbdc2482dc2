//! The SQL surface of maintenance: `webhook_dedup.run_maintenance()` (one
//! pass of [`crate::maintenance`], what the background worker calls) and
//! `webhook_dedup.default_retention()`.

/// SQL functions in schema `webhook_dedup`.
#[pgrx::pg_schema]
mod webhook_dedup {
    use pgrx::datum::Interval;
    use pgrx::prelude::*;

    /// One maintenance pass (see `crate::maintenance` for the steps). One
    /// row: `ran` false (and nothing done) when another pass holds the
    /// maintenance lock; the counts of what it did; `more` true when a step
    /// stopped at `webhook_dedup.batch_size` (call again); `errors` one entry per step that failed (the others
    /// ran; each failure was also raised as a WARNING). The pass is also
    /// recorded in `webhook_dedup.maintenance_runs`.
    #[pg_extern(volatile, parallel_unsafe)]
    #[allow(clippy::type_complexity)] // pgrx needs the column names inline
    fn run_maintenance() -> TableIterator<
        'static,
        (
            name!(ran, bool),
            name!(leases_expired, i32),
            name!(dead_lettered, i32),
            name!(keys_pruned, i64),
            name!(keys_kept, i64),
            name!(history_pruned, i64),
            name!(metrics_flushed, i64),
            name!(retention_warnings, i32),
            name!(more, bool),
            name!(errors, Vec<String>),
            name!(intents_expired, i32),
            name!(intents_pruned, i64),
            name!(payloads_pruned, i64),
            name!(partitions_created, i32),
            name!(partitions_dropped, i32),
            name!(keys_redriven, i64),
        ),
    > {
        let p = crate::maintenance::run();
        TableIterator::once((
            p.ran,
            p.leases_expired,
            p.dead_lettered,
            p.keys_pruned,
            p.keys_kept,
            p.history_pruned,
            p.metrics_flushed,
            p.retention_warnings,
            p.more,
            p.errors,
            p.intents_expired,
            p.intents_pruned,
            p.payloads_pruned,
            p.partitions_created,
            p.partitions_dropped,
            p.keys_redriven,
        ))
    }

    /// `webhook_dedup.retention` as an interval: the retention of sources
    /// without their own (`webhook_dedup.sources.retention`).
    #[pg_extern(stable, parallel_safe)]
    fn default_retention() -> Interval {
        crate::maintenance::retention::interval(crate::guc::retention_us())
    }
}
