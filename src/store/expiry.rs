//! Maintenance's reads and writes of keys: expired leases for the sweep,
//! and completed keys past retention, deleted in batches.

use super::{KeyRow, KEY_ROW};
use crate::spi::{arg, Conn, Snap, Statement};
use crate::time::timestamptz;
use pgrx::datum::Interval;
use pgrx::pg_sys::{INT8OID, INTERVALOID, TIMESTAMPTZOID};

static EXPIRED_LEASES: Statement =
    Statement::returning(crate::sql_statement!("maintenance_expired_leases.sql"), &[TIMESTAMPTZOID, INT8OID], KEY_ROW);
static EXPIRE_KEYS: Statement = Statement::returning(
    crate::sql_statement!("maintenance_expire_keys.sql"),
    &[TIMESTAMPTZOID, INTERVALOID, INT8OID],
    &["looked_at", "deleted", "kept"],
);

/// Up to `limit` processing keys whose lease expired at `now`, oldest
/// expiry first, each locked for this transaction (keys locked by others
/// are skipped: a claim or their holder is on them right now).
pub fn expired_leases(conn: &Conn<'_>, now: i64, limit: i64) -> Vec<KeyRow> {
    let rows = conn.execute(&EXPIRED_LEASES, &[arg(timestamptz(now)), arg(limit)], Snap::Statement);
    (0..rows.len()).map(|i| KeyRow::read(&rows, i, 1)).collect()
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
/// rescheduled. One statement (`maintenance_expire_keys.sql`).
pub fn expire_keys(conn: &Conn<'_>, now: i64, default_retention_us: i64, limit: i64) -> Expired {
    let rows = conn.execute(
        &EXPIRE_KEYS,
        &[arg(timestamptz(now)), arg(Interval::from_micros(default_retention_us)), arg(limit)],
        Snap::Statement,
    );
    Expired {
        looked_at: rows.get(0, 1).unwrap_or(0),
        deleted: rows.get(0, 2).unwrap_or(0),
        kept: rows.get(0, 3).unwrap_or(0),
    }
}
