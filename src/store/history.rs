//! The history past retention, pruned by maintenance: the rows the tables
//! of history keep per source (`webhook_dedup.watermarks`,
//! `replay_guards`, `signature_tokens`, `conflict_log` and
//! `claim_counts`), deleted in bounded batches by one statement that covers
//! them all. Named `history` because no one of those tables owns the
//! statement: each table's other reads and writes are in its own file
//! ([`super::watermarks`], [`super::replay_guards`],
//! [`super::signature_tokens`], [`super::claim_counts`]; the conflicts are
//! the key store's). The node's own `maintenance_runs` are
//! [`super::maintenance_runs`]'.
//!
//! On one server, one statement (`history_prune.sql`). On a
//! distributed install (docs/distributed.md), where Citus locks rows of one
//! shard per statement, source by source: the sources with history old
//! enough (`history_sources.sql`), of those the ones
//! whose shards are on this node ([`super::citus::local_sources`]), each
//! pruned by `history_prune_of_source.sql`.

use crate::spi::{arg, Conn, Snap, Statement};
use crate::time::timestamptz;
use pgrx::datum::Interval;
use pgrx::pg_sys::{INT8OID, INTERVALOID, TEXTOID, TIMESTAMPTZOID};

static HISTORY: Statement =
    Statement::new(crate::sql_statement!("history_prune.sql"), &[TIMESTAMPTZOID, INTERVALOID, INT8OID, INTERVALOID]);
static SOURCES_WITH_HISTORY: Statement = Statement::returning(
    crate::sql_statement!("history_sources.sql"),
    &[TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID],
    &["source"],
);
static HISTORY_OF_SOURCE: Statement = Statement::new(
    crate::sql_statement!("history_prune_of_source.sql"),
    &[TIMESTAMPTZOID, INTERVALOID, INT8OID, INTERVALOID, TEXTOID],
);

/// How long per-minute claim counts are kept, in microseconds (the
/// statements say `'2 hours'` too).
const MINUTE_COUNTS_KEPT_US: i64 = 2 * 3_600 * 1_000_000;

/// The rows one [`prune`] deleted, per table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    pub watermarks: i64,
    pub conflicts: i64,
    /// Claim counts, hourly and per-minute.
    pub counts: i64,
    pub guards: i64,
    pub tokens: i64,
}

impl Pruned {
    /// The counts in the statements' column order (watermarks, conflicts,
    /// counts, guards, tokens).
    pub fn per_table(&self) -> [i64; 5] {
        [self.watermarks, self.conflicts, self.counts, self.guards, self.tokens]
    }

    fn from_table(t: [i64; 5]) -> Pruned {
        Pruned { watermarks: t[0], conflicts: t[1], counts: t[2], guards: t[3], tokens: t[4] }
    }
}

/// Delete up to `batch` rows of each history table past retention at `now`:
/// a row goes when it is older than its source's retention
/// (`webhook_dedup.sources.retention`, else `default_retention_us`), and
/// never when younger than `shortest_retention_us` (the shortest retention
/// of any source: the index bound of the scans); per-minute claim counts
/// after two hours; a replay guard only once its key is gone, a signed
/// token once its signature's window has closed. Times and durations in
/// microseconds. Rows locked by others are skipped (`SKIP LOCKED`).
/// Distributed, the sources whose shards are on this node, source by
/// source, up to `batch` rows of each table in all.
pub fn prune(conn: &Conn<'_>, now: i64, default_retention_us: i64, shortest_retention_us: i64, batch: i64) -> Pruned {
    let default = Interval::from_micros(default_retention_us);
    if !crate::citus::keys_distributed() {
        let rows = conn.execute(
            &HISTORY,
            &[arg(timestamptz(now)), arg(default), arg(batch), arg(Interval::from_micros(shortest_retention_us))],
            Snap::Statement,
        );
        let mut pruned = [0i64; 5];
        for (column, total) in (1..).zip(pruned.iter_mut()) {
            *total = rows.get(0, column).unwrap_or(0);
        }
        return Pruned::from_table(pruned);
    }
    Pruned::from_table(by_source(conn, now, default_retention_us, shortest_retention_us, batch))
}

/// Distributed: prune the history of the sources whose shards are on this
/// node, source by source, up to `batch` rows of each table in all; the
/// rows pruned per table.
fn by_source(conn: &Conn<'_>, now: i64, default_retention_us: i64, shortest_retention_us: i64, batch: i64) -> [i64; 5] {
    let sources = conn.execute(
        &SOURCES_WITH_HISTORY,
        &[
            arg(timestamptz(now.saturating_sub(shortest_retention_us))),
            arg(timestamptz(now.saturating_sub(MINUTE_COUNTS_KEPT_US))),
            arg(batch),
        ],
        Snap::Statement,
    );
    let mut pruned = [0i64; 5];
    for source in super::citus::local_sources(conn, &sources) {
        let remaining = batch - pruned.iter().copied().max().unwrap_or(0);
        if remaining <= 0 {
            break;
        }
        let rows = conn.execute(
            &HISTORY_OF_SOURCE,
            &[
                arg(timestamptz(now)),
                arg(Interval::from_micros(default_retention_us)),
                arg(remaining),
                arg(Interval::from_micros(shortest_retention_us)),
                arg(source.as_str()),
            ],
            Snap::Statement,
        );
        for (column, total) in (1..).zip(pruned.iter_mut()) {
            *total += rows.get::<i64>(0, column).unwrap_or(0);
        }
    }
    pruned
}
