//! The out-of-order guard's watermarks (`webhook_dedup.watermarks`, one row
//! per source and entity): `webhook_advance`'s atomic upsert. Named after
//! the table, as every file of the store is; the guard's rules are in
//! `docs/ordering.md` and the SQL surface's is `src/api/ordering.rs`
//! (pruning past retention is [`super::history`]'s).

use crate::spi::{arg, Conn, Snap, Statement};
use crate::time::timestamptz;
use pgrx::pg_sys::{INT8OID, TEXTOID, TIMESTAMPTZOID};

static ADVANCE: Statement = Statement::new(
    crate::sql_statement!("watermarks_advance.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, INT8OID, TIMESTAMPTZOID],
);

/// Move the watermark of (`source`, `entity_id`) to the event at
/// `source_updated_at` (microseconds since 2000-01-01 UTC) with `event_id`
/// and `sequence`, when it is newer than every event seen for the entity
/// (the tie rule is `watermarks_advance.sql`'s); `now` (microseconds) is its
/// `updated_at`. True when it moved (apply the event), false when the
/// event is older (nothing changed). One upsert on the statement snapshot:
/// a concurrent advance of the entity is waited for. Errors:
/// PostgreSQL's (40001 under REPEATABLE READ when the row changed after the
/// snapshot).
pub fn advance(
    conn: &Conn<'_>,
    source: &str,
    entity_id: &str,
    source_updated_at: i64,
    event_id: Option<&str>,
    sequence: Option<i64>,
    now: i64,
) -> bool {
    let rows = conn.execute(
        &ADVANCE,
        &[
            arg(source),
            arg(entity_id),
            arg(timestamptz(source_updated_at)),
            arg(event_id),
            arg(sequence),
            arg(timestamptz(now)),
        ],
        Snap::Statement,
    );
    rows.len() == 1
}
