//! The queue's reads and writes (persist-then-process): storing a delivery
//! with its payload, taking due keys locked, reading a payload.

use super::{Key, KeyRow, Upserted, KEY_ROW, UPSERTED};
use crate::jsonb::Jsonb;
use crate::spi::{arg, Conn, Snap, Statement};
use crate::time::timestamptz;
use pgrx::pg_sys::{BYTEAOID, INT4OID, JSONBOID, TEXTOID, TIMESTAMPTZOID};

static ENQUEUE: Statement = Statement::returning(
    crate::sql_statement!("queue_enqueue.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, BYTEAOID, BYTEAOID, TEXTOID, JSONBOID, TIMESTAMPTZOID],
    UPSERTED,
);
static TAKE: Statement =
    Statement::returning(crate::sql_statement!("queue_take.sql"), &[TIMESTAMPTZOID, TEXTOID, INT4OID], KEY_ROW);
static TAKE_OF_SOURCE: Statement = Statement::returning(
    crate::sql_statement!("queue_take_of_source.sql"),
    &[TIMESTAMPTZOID, TEXTOID, INT4OID],
    KEY_ROW,
);
static DUE_SOURCES: Statement =
    Statement::returning(crate::sql_statement!("queue_due_sources.sql"), &[TIMESTAMPTZOID, INT4OID], &["source"]);
static PARK: Statement = Statement::returning(crate::sql_statement!("queue_park.sql"), &[TEXTOID], &["count"]);
static UNPARK: Statement = Statement::returning(crate::sql_statement!("queue_unpark.sql"), &[TEXTOID], &["count"]);
static PAYLOAD: Statement = Statement::returning(
    crate::sql_statement!("queue_payload.sql"),
    &[TEXTOID, TEXTOID],
    &["payload", "headers", "redacted"],
);
static DEAD_LETTER_ERASED: Statement =
    Statement::new(crate::sql_statement!("queue_dead_letter_erased.sql"), &[TEXTOID, TEXTOID]);

/// A delivery to store for the workers.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    pub key: Key<'a>,
    pub now: i64,
    pub payload: &'a [u8],
    /// SHA-256 of `payload`.
    pub fingerprint: &'a [u8],
    pub event_type: Option<&'a str>,
    pub headers: Option<Jsonb>,
    /// A reconciliation job's enqueue (`webhook_dedup.reconcile`): the
    /// key records it (`reconciled_at` = `now`).
    pub reconciled: bool,
}

/// Store the key as `pending` (due now) with its payload, or lock the known
/// key and count the delivery on it (as [`super::claim::upsert`]). One
/// statement (`queue_enqueue.sql`).
pub fn enqueue(conn: &Conn<'_>, d: &Delivery<'_>) -> Upserted {
    let rows = conn.execute(
        &ENQUEUE,
        &[
            arg(d.key.source),
            arg(d.key.idem_key),
            arg(timestamptz(d.now)),
            arg(d.payload),
            arg(d.fingerprint),
            arg(d.event_type),
            arg(d.headers),
            arg(d.reconciled.then(|| timestamptz(d.now))),
        ],
        Snap::Statement,
    );
    Upserted::read(&rows)
}

/// Up to `limit` keys due at `now` (of `source`, or of every source), oldest
/// first, each locked for this transaction; keys locked by others are
/// skipped, not waited for. Distributed ([`super::citus`]), one source at a
/// time: the sources with due keys, the oldest due first, then each
/// source's keys oldest first (so "oldest first" holds within a source).
pub fn take_due(conn: &Conn<'_>, now: i64, source: Option<&str>, limit: i32) -> Vec<KeyRow> {
    if !crate::citus::keys_distributed() {
        return KeyRow::all(&conn.execute(&TAKE, &[arg(timestamptz(now)), arg(source), arg(limit)], Snap::Statement));
    }
    let take_of = |source: &str, limit: i32| {
        KeyRow::all(&conn.execute(&TAKE_OF_SOURCE, &[arg(timestamptz(now)), arg(source), arg(limit)], Snap::Statement))
    };
    if let Some(source) = source {
        return take_of(source, limit);
    }
    let due = conn.execute(&DUE_SOURCES, &[arg(timestamptz(now)), arg(limit)], Snap::Statement);
    let mut taken = Vec::new();
    for i in 0..due.len() {
        let remaining = limit - taken.len() as i32;
        if remaining <= 0 {
            break;
        }
        let source: String = due.get(i, 1).expect("GROUP BY source gives a source");
        taken.extend(take_of(&source, remaining));
    }
    taken
}

/// What the queue holds for a key: its payload and headers, if any.
pub struct Queued {
    pub payload: Option<Vec<u8>>,
    pub headers: Option<Jsonb>,
    /// `webhook_dedup.redact` erased the key's deliveries.
    pub redacted: bool,
}

/// The payload and headers stored for a key, if any, and whether it was
/// redacted.
pub fn payload(conn: &Conn<'_>, key: Key<'_>) -> Queued {
    let rows = conn.execute(&PAYLOAD, &[arg(key.source), arg(key.idem_key)], Snap::Statement);
    if rows.is_empty() {
        return Queued { payload: None, headers: None, redacted: false };
    }
    Queued { payload: rows.get(0, 1), headers: rows.get_jsonb(0, 2), redacted: rows.get(0, 3).unwrap_or(false) }
}

/// Dead-letter the locked `key`, whose payload a redaction erased.
pub fn dead_letter_erased(conn: &Conn<'_>, key: Key<'_>) {
    let rows = conn.execute(&DEAD_LETTER_ERASED, &[arg(key.source), arg(key.idem_key)], Snap::Statement);
    super::transitions::expect_one(rows.len());
}

/// Park the keys of `source` that wait for `webhook_next` (pending and
/// failed: due at [`crate::claim::PAUSED_DUE_AT`]). Returns how many.
pub fn park(conn: &Conn<'_>, source: &str) -> i64 {
    conn.execute(&PARK, &[arg(source)], Snap::Statement).get(0, 1).unwrap_or(0)
}

/// Make the parked keys of `source` due again as before the pause (a
/// failed key at its retry, a pending key at its first delivery). Returns
/// how many.
pub fn unpark(conn: &Conn<'_>, source: &str) -> i64 {
    conn.execute(&UNPARK, &[arg(source)], Snap::Statement).get(0, 1).unwrap_or(0)
}
