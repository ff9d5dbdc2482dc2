//! The record of maintenance passes (`webhook_dedup.maintenance_runs`, a
//! table each node keeps for itself, also on a distributed install): a
//! pass recorded when it ran, and the runs past retention pruned. Named
//! after the table; what a pass does is [`crate::maintenance`]'s.

use crate::spi::{arg, Conn, Snap, Statement};
use crate::time::timestamptz;
use pgrx::datum::Interval;
use pgrx::pg_sys::{BOOLOID, INT4OID, INT8OID, INTERVALOID, TEXTARRAYOID, TIMESTAMPTZOID};

static RECORD: Statement = Statement::new(
    crate::sql_statement!("maintenance_runs_record.sql"),
    &[
        TIMESTAMPTZOID,
        TIMESTAMPTZOID,
        INT4OID,
        INT4OID,
        INT8OID,
        INT8OID,
        INT8OID,
        INT8OID,
        INT4OID,
        BOOLOID,
        TEXTARRAYOID,
        INT4OID,
        INT8OID,
        INT8OID,
        INT4OID,
        INT4OID,
        INT8OID,
    ],
);
static PRUNE: Statement =
    Statement::new(crate::sql_statement!("maintenance_runs_prune.sql"), &[TIMESTAMPTZOID, INTERVALOID, INT8OID]);

/// One pass as `webhook_dedup.maintenance_runs` keeps it (its columns but
/// the id and `application_name`, which the statement takes from the
/// session). Times in microseconds since 2000-01-01 UTC; the counts are
/// those of `run_maintenance()`'s result ([`crate::maintenance::Pass`]).
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    pub started_at: i64,
    pub finished_at: i64,
    pub leases_expired: i32,
    pub dead_lettered: i32,
    pub keys_pruned: i64,
    pub keys_kept: i64,
    pub history_pruned: i64,
    pub metrics_flushed: i64,
    pub retention_warnings: i32,
    pub more: bool,
    /// The steps that failed, with their errors.
    pub errors: &'a [String],
    pub intents_expired: i32,
    pub intents_pruned: i64,
    pub payloads_pruned: i64,
    pub partitions_created: i32,
    pub partitions_dropped: i32,
    pub keys_redriven: i64,
}

/// Keep `run` (one insert, in the caller's transaction: a pass that rolls
/// back leaves no row).
pub fn record(conn: &Conn<'_>, run: &Run<'_>) {
    conn.execute(
        &RECORD,
        &[
            arg(timestamptz(run.started_at)),
            arg(timestamptz(run.finished_at)),
            arg(run.leases_expired),
            arg(run.dead_lettered),
            arg(run.keys_pruned),
            arg(run.keys_kept),
            arg(run.history_pruned),
            arg(run.metrics_flushed),
            arg(run.retention_warnings),
            arg(run.more),
            arg(run.errors.to_vec()),
            arg(run.intents_expired),
            arg(run.intents_pruned),
            arg(run.payloads_pruned),
            arg(run.partitions_created),
            arg(run.partitions_dropped),
            arg(run.keys_redriven),
        ],
        Snap::Statement,
    );
}

/// Delete up to `batch` of this node's runs that started before `now`
/// minus `retention_us` (`webhook_dedup.retention`; microseconds); how
/// many went.
pub fn prune(conn: &Conn<'_>, now: i64, retention_us: i64, batch: i64) -> i64 {
    let rows = conn.execute(
        &PRUNE,
        &[arg(timestamptz(now)), arg(Interval::from_micros(retention_us)), arg(batch)],
        Snap::Statement,
    );
    rows.get(0, 1).unwrap_or(0)
}
