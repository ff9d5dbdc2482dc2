//! Pruning history past retention: watermarks, replay guards, signed
//! tokens, conflicts, claim counts and maintenance runs, a bounded batch per table and pass (keys are
//! [`super::expiry`]'s).
//!
//! On one server, one statement (`maintenance_prune_history.sql`). On a
//! distributed install (docs/distributed.md), where Citus locks rows of one
//! shard per statement, source by source: the sources with history old
//! enough (`maintenance_sources_with_history.sql`), of those the ones
//! whose shards are on this node ([`crate::store::citus::local_sources`]),
//! each pruned by `maintenance_prune_history_of_source.sql`. Then, either
//! way, this node's maintenance runs (`maintenance_prune_runs.sql`).

use super::{Counts, Retention};
use crate::spi::{self, arg, Conn, Snap, Statement};
use crate::store::citus;
use crate::time::timestamptz;
use pgrx::datum::Interval;
use pgrx::pg_sys::{INT8OID, INTERVALOID, TEXTOID, TIMESTAMPTZOID};

static HISTORY: Statement = Statement::new(
    crate::sql_statement!("maintenance_prune_history.sql"),
    &[TIMESTAMPTZOID, INTERVALOID, INT8OID, INTERVALOID],
);
static SOURCES_WITH_HISTORY: Statement = Statement::returning(
    crate::sql_statement!("maintenance_sources_with_history.sql"),
    &[TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID],
    &["source"],
);
static HISTORY_OF_SOURCE: Statement = Statement::new(
    crate::sql_statement!("maintenance_prune_history_of_source.sql"),
    &[TIMESTAMPTZOID, INTERVALOID, INT8OID, INTERVALOID, TEXTOID],
);
static RUNS: Statement =
    Statement::new(crate::sql_statement!("maintenance_prune_runs.sql"), &[TIMESTAMPTZOID, INTERVALOID, INT8OID]);

/// How long per-minute claim counts are kept, in microseconds.
const MINUTE_COUNTS_KEPT_US: i64 = 2 * 3_600 * 1_000_000;

/// Delete up to `batch` rows of each history table past retention.
pub(super) fn history(now: i64, batch: i64, retention: &Retention, pass: &mut Counts) {
    spi::connected(|conn| {
        let mut add = |pruned: i64| {
            pass.history_pruned += pruned;
            pass.more |= pruned >= batch;
        };
        let default = Interval::from_micros(retention.default_us);
        if !crate::citus::keys_distributed() {
            let rows = conn.execute(
                &HISTORY,
                &[arg(timestamptz(now)), arg(default), arg(batch), arg(Interval::from_micros(retention.shortest_us))],
                Snap::Statement,
            );
            (1..=5).for_each(|column| add(rows.get(0, column).unwrap_or(0)));
        } else {
            history_by_source(conn, now, batch, retention).into_iter().for_each(&mut add);
        }
        let runs = conn.execute(&RUNS, &[arg(timestamptz(now)), arg(default), arg(batch)], Snap::Statement);
        add(runs.get(0, 1).unwrap_or(0));
    });
}

/// Distributed: prune the history of the sources whose shards are on this
/// node, source by source, up to `batch` rows of each table in all; the
/// rows pruned per table.
fn history_by_source(conn: &Conn<'_>, now: i64, batch: i64, retention: &Retention) -> [i64; 5] {
    let sources = conn.execute(
        &SOURCES_WITH_HISTORY,
        &[
            arg(timestamptz(now.saturating_sub(retention.shortest_us))),
            arg(timestamptz(now.saturating_sub(MINUTE_COUNTS_KEPT_US))),
            arg(batch),
        ],
        Snap::Statement,
    );
    let mut pruned = [0i64; 5];
    for source in citus::local_sources(conn, &sources) {
        let remaining = batch - pruned.iter().copied().max().unwrap_or(0);
        if remaining <= 0 {
            break;
        }
        let rows = conn.execute(
            &HISTORY_OF_SOURCE,
            &[
                arg(timestamptz(now)),
                arg(Interval::from_micros(retention.default_us)),
                arg(remaining),
                arg(Interval::from_micros(retention.shortest_us)),
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
