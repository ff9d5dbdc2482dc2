//! Pruning past retention what is not partitioned: history tables
//! (watermarks, conflicts, claim counts, maintenance runs), a bounded batch
//! per table and pass, and expired completed keys that sit in the default
//! partition (which is never dropped). Keys in real partitions are never
//! deleted row by row: their partition is dropped whole
//! ([`super::partitions`]).

use super::{Pass, Retention};
use crate::api::protocol::try_lock_key;
use crate::spi::{self, arg, Snap, Statement};
use crate::time::timestamptz;
use pgrx::datum::Interval;
use pgrx::pg_sys::{INT8OID, INTERVALOID, TEXTARRAYOID, TIMESTAMPTZOID};

static HISTORY: Statement = Statement::new(
    crate::sql_statement!("maintenance_prune_history.sql"),
    &[TIMESTAMPTZOID, INTERVALOID, INT8OID, INTERVALOID],
);

static DEFAULT_EXPIRED: Statement =
    Statement::new(crate::sql_statement!("maintenance_default_expired.sql"), &[TIMESTAMPTZOID, INTERVALOID, INT8OID]);

static DEFAULT_DELETE: Statement = Statement::new(
    crate::sql_statement!("maintenance_default_delete.sql"),
    &[TIMESTAMPTZOID, INTERVALOID, TEXTARRAYOID, TEXTARRAYOID],
);

/// Delete up to `batch` rows of each history table past retention.
pub(super) fn history(now: i64, batch: i64, retention: &Retention, pass: &mut Pass) {
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
        for column in 1..=4 {
            let pruned: i64 = rows.get(0, column).unwrap_or(0);
            pass.history_pruned += pruned;
            pass.more |= pruned >= batch;
        }
    });
}

/// Delete up to `batch` expired completed keys from the default partition,
/// each under its key lock (a key whose lock is held is left for later).
pub(super) fn default_partition(now: i64, batch: i64, retention: &Retention, pass: &mut Pass) {
    spi::connected(|conn| {
        let default = Interval::from_micros(retention.default_us);
        let expired = conn.execute(&DEFAULT_EXPIRED, &[arg(timestamptz(now)), arg(default), arg(batch)], Snap::Latest);
        pass.more |= expired.len() as i64 >= batch;
        let mut locked: (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
        for i in 0..expired.len() {
            let source: String = expired.get(i, 1).expect("source");
            let idem_key: String = expired.get(i, 2).expect("idem_key");
            // A busy key is left for a later pass.
            if try_lock_key(&source, &idem_key) {
                locked.0.push(source);
                locked.1.push(idem_key);
            }
        }
        if locked.0.is_empty() {
            return;
        }
        // Keys touched since the read are no longer expired; the statement
        // checks again and leaves them.
        let deleted = conn.execute(
            &DEFAULT_DELETE,
            &[arg(timestamptz(now)), arg(default), arg(locked.0), arg(locked.1)],
            Snap::Statement,
        );
        pass.keys_pruned += deleted.len() as i64;
    });
}
