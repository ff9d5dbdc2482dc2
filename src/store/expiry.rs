//! Maintenance's reads and writes of keys: expired leases for the sweep,
//! and completed keys past retention, deleted in batches.

use super::{KeyRow, KEY_ROW};
use crate::spi::{arg, Conn, Snap, Statement};
use crate::time::timestamptz;
use pgrx::datum::Interval;
use pgrx::pg_sys::{INT8OID, INTERVALOID, TEXTOID, TIMESTAMPTZOID};

static EXPIRED_LEASES: Statement =
    Statement::returning(crate::sql_statement!("expiry_expired_leases.sql"), &[TIMESTAMPTZOID, INT8OID], KEY_ROW);
static EXPIRE_KEYS: Statement = Statement::returning(
    crate::sql_statement!("expiry_expire_keys.sql"),
    &[TIMESTAMPTZOID, INTERVALOID, INT8OID],
    &["looked_at", "deleted", "kept"],
);

// Distributed (src/store/citus.rs): the same, one source of this node's
// shards at a time.
static SOURCES_EXPIRED_LEASES: Statement = Statement::returning(
    crate::sql_statement!("expiry_sources_expired_leases.sql"),
    &[TIMESTAMPTZOID, INT8OID],
    &["source"],
);
static EXPIRED_LEASES_OF_SOURCE: Statement = Statement::returning(
    crate::sql_statement!("expiry_expired_leases_of_source.sql"),
    &[TIMESTAMPTZOID, INT8OID, TEXTOID],
    KEY_ROW,
);
static SOURCES_PAST_RETENTION: Statement = Statement::returning(
    crate::sql_statement!("expiry_sources_past_retention.sql"),
    &[TIMESTAMPTZOID, INT8OID],
    &["source"],
);
static EXPIRE_KEYS_OF_SOURCE: Statement = Statement::returning(
    crate::sql_statement!("expiry_expire_keys_of_source.sql"),
    &[TIMESTAMPTZOID, INTERVALOID, INT8OID, TEXTOID],
    &["looked_at", "deleted", "kept"],
);

/// Up to `limit` processing keys whose lease expired at `now`, oldest
/// expiry first, each locked for this transaction (keys locked by others
/// are skipped: a claim or their holder is on them right now).
/// Distributed, those of the sources whose shards are on this node, source
/// by source.
pub fn expired_leases(conn: &Conn<'_>, now: i64, limit: i64) -> Vec<KeyRow> {
    let read = |rows: crate::spi::Rows<'_>| KeyRow::all(&rows);
    if !crate::citus::keys_distributed() {
        return read(conn.execute(&EXPIRED_LEASES, &[arg(timestamptz(now)), arg(limit)], Snap::Statement));
    }
    let due = conn.execute(&SOURCES_EXPIRED_LEASES, &[arg(timestamptz(now)), arg(limit)], Snap::Statement);
    let mut found = Vec::new();
    for source in super::citus::local_sources(conn, &due) {
        let remaining = limit - found.len() as i64;
        if remaining <= 0 {
            break;
        }
        found.extend(read(conn.execute(
            &EXPIRED_LEASES_OF_SOURCE,
            &[arg(timestamptz(now)), arg(remaining), arg(source.as_str())],
            Snap::Statement,
        )));
    }
    found
}

/// What one batch of [`expire_keys`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expired {
    /// Completed keys whose `expires_at` had come.
    pub looked_at: i64,
    /// Deleted (with their payloads): not active within their retention.
    pub deleted: i64,
    /// Kept, to be looked at again when their retention ends: active since
    /// (a late duplicate), or their source's retention grew.
    pub kept: i64,
}

/// Up to `limit` completed keys whose `expires_at` has come, oldest first:
/// deleted when their last activity is older than their source's retention
/// (`webhook_dedup.sources.retention`, else `default_retention_us`), else
/// rescheduled. One statement (`expiry_expire_keys.sql`).
/// Distributed, those of the sources whose shards are on this node, source
/// by source (`expiry_expire_keys_of_source.sql`).
pub fn expire_keys(conn: &Conn<'_>, now: i64, default_retention_us: i64, limit: i64) -> Expired {
    let read = |rows: crate::spi::Rows<'_>| Expired {
        looked_at: rows.get(0, 1).unwrap_or(0),
        deleted: rows.get(0, 2).unwrap_or(0),
        kept: rows.get(0, 3).unwrap_or(0),
    };
    let retention = Interval::from_micros(default_retention_us);
    if !crate::citus::keys_distributed() {
        return read(conn.execute(&EXPIRE_KEYS, &[arg(timestamptz(now)), arg(retention), arg(limit)], Snap::Statement));
    }
    let due = conn.execute(&SOURCES_PAST_RETENTION, &[arg(timestamptz(now)), arg(limit)], Snap::Statement);
    let mut total = Expired::default();
    for source in super::citus::local_sources(conn, &due) {
        let remaining = limit - total.looked_at;
        if remaining <= 0 {
            break;
        }
        let one = read(conn.execute(
            &EXPIRE_KEYS_OF_SOURCE,
            &[arg(timestamptz(now)), arg(retention), arg(remaining), arg(source.as_str())],
            Snap::Statement,
        ));
        total.looked_at += one.looked_at;
        total.deleted += one.deleted;
        total.kept += one.kept;
    }
    total
}
