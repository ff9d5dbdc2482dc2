//! The replay guard (`webhook_dedup.replay_guards`): per source and signed
//! body (SHA-256 of the raw bytes), the idempotency key the body belongs
//! to. GitHub and Shopify sign the body but neither the delivery id nor a
//! time, so whoever captured one signed delivery can re-send it under a new
//! id; the guard makes that a duplicate of the key the body first came with
//! (`webhook_receive`, [`crate::api::receive`]).
//!
//! Reads and writes only; the decision is the caller's. Rows are pruned by
//! maintenance after the source's retention (from `seen_at`, the time the
//! body was given to its key).

use crate::spi::{arg, Conn, Snap, Statement};
use crate::time::timestamptz;
use pgrx::pg_sys::{BYTEAOID, TEXTOID, TIMESTAMPTZOID};

static INSERT: Statement = Statement::returning(
    crate::sql_statement!("replay_guard_insert.sql"),
    &[TEXTOID, BYTEAOID, TEXTOID, TIMESTAMPTZOID],
    &["inserted"],
);
static READ: Statement =
    Statement::returning(crate::sql_statement!("replay_guard_read.sql"), &[TEXTOID, BYTEAOID], &["idem_key"]);
static TAKE_OVER: Statement = Statement::returning(
    crate::sql_statement!("replay_guard_take_over.sql"),
    &[TEXTOID, BYTEAOID, TEXTOID, TIMESTAMPTZOID, TEXTOID],
    &["taken"],
);

/// What the guard of a body says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    /// The body belongs to the key that asked (new, or a redelivery of it).
    Ours,
    /// The body belongs to this other key.
    Theirs(String),
}

/// Give the body `body_sha256` of `source` to `idem_key` if it has no
/// guard yet, else say whose it is. `now` in microseconds (PostgreSQL
/// epoch).
pub fn claim(conn: &Conn<'_>, source: &str, body_sha256: &[u8; 32], idem_key: &str, now: i64) -> Guard {
    let body = body_sha256.as_slice();
    // A row deleted (pruned) between the insert and the read is a new body
    // again: try twice, then give up (it cannot keep happening).
    for _ in 0..3 {
        let inserted =
            conn.execute(&INSERT, &[arg(source), arg(body), arg(idem_key), arg(timestamptz(now))], Snap::Statement);
        if !inserted.is_empty() {
            return Guard::Ours;
        }
        // The conflicting row is committed (the insert waited for it), but
        // may be newer than a REPEATABLE READ snapshot: read the latest.
        let rows = conn.execute(&READ, &[arg(source), arg(body)], Snap::Latest);
        if let Some(owner) = (!rows.is_empty()).then(|| rows.get::<String>(0, 1)).flatten() {
            return if owner == idem_key { Guard::Ours } else { Guard::Theirs(owner) };
        }
    }
    crate::store::serialization_failure()
}

/// Give the body to `idem_key` if it still belongs to `from`; `false` when
/// another delivery took it first.
pub fn take_over(conn: &Conn<'_>, source: &str, body_sha256: &[u8; 32], idem_key: &str, from: &str, now: i64) -> bool {
    let rows = conn.execute(
        &TAKE_OVER,
        &[arg(source), arg(body_sha256.as_slice()), arg(idem_key), arg(timestamptz(now)), arg(from)],
        Snap::Statement,
    );
    !rows.is_empty()
}
