//! Pruning history past retention: watermarks, replay guards, conflicts,
//! claim counts and maintenance runs, a bounded batch per table and pass (keys are
//! [`super::expiry`]'s).

use super::{Counts, Retention};
use crate::spi::{self, arg, Snap, Statement};
use crate::time::timestamptz;
use pgrx::datum::Interval;
use pgrx::pg_sys::{INT8OID, INTERVALOID, TIMESTAMPTZOID};

static HISTORY: Statement = Statement::new(
    crate::sql_statement!("maintenance_prune_history.sql"),
    &[TIMESTAMPTZOID, INTERVALOID, INT8OID, INTERVALOID],
);

/// Delete up to `batch` rows of each history table past retention.
pub(super) fn history(now: i64, batch: i64, retention: &Retention, pass: &mut Counts) {
    spi::connected(|conn| {
        let rows = conn.execute(
            &HISTORY,
            &[
                arg(timestamptz(now)),
                arg(Interval::from_micros(retention.default_us)),
                arg(batch),
                arg(Interval::from_micros(retention.shortest_us)),
            ],
            Snap::Statement,
        );
        for column in 1..=5 {
            let pruned: i64 = rows.get(0, column).unwrap_or(0);
            pass.history_pruned += pruned;
            pass.more |= pruned >= batch;
        }
    });
}
