//! The flushed claim counters (`webhook_dedup.claim_counts`, one row per
//! source, event type and hour or minute): the flush adds each entry of
//! the shared counter table to its row. Named after the table; the shared
//! memory and the flush are [`crate::metrics`]'s, what is counted is the
//! core's ([`webhook_dedup_core::metrics`]), and the rows past retention are
//! pruned by [`super::history`].

use crate::spi::{arg, Conn, Snap, Statement};
use crate::time::timestamptz;
use pgrx::pg_sys::{INT8ARRAYOID, TEXTOID, TIMESTAMPTZOID};
use webhook_dedup_core::metrics::Row;

static UPSERT: Statement = Statement::new(
    crate::sql_statement!("claim_counts_upsert.sql"),
    &[TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, INT8ARRAYOID],
);

/// Add `row`'s counts (one per counter, in the order of `Counter::ALL`) to
/// its row of the table: its bucket (microseconds since 2000-01-01 UTC),
/// source, event type and width (a minute or an hour), made when missing.
/// One upsert on the statement snapshot, in the caller's transaction.
pub fn add(conn: &Conn<'_>, row: &Row) {
    conn.execute(
        &UPSERT,
        &[
            arg(timestamptz(row.bucket)),
            arg(row.source.as_str()),
            arg(row.event_type.as_str()),
            arg(if row.minute { "1 minute" } else { "1 hour" }),
            arg(row.counts.clone()),
        ],
        Snap::Statement,
    );
}
