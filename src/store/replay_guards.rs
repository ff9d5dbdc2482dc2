//! The replay guard (`webhook_dedup.replay_guards`): per source and signed
//! body (SHA-256 of the raw bytes), the idempotency key the body belongs
//! to. GitHub and Shopify sign the body but neither the delivery id nor a
//! time, so whoever captured one signed delivery can re-send it under a new
//! id; the guard makes that a duplicate of the key the body first came with
//! (`webhook_receive`, `crate::engine::receive`).
//!
//! The protocol, as the keys' (`crate::store`):
//! 1. **A new body is one insert, arbitrated by the primary key**: of two
//!    concurrent first deliveries of a body, the second waits in the index
//!    for the first's transaction, then finds its row.
//! 2. **A known body's row is locked** (`FOR NO KEY UPDATE`) by every
//!    delivery that finds it and may change a key, until its transaction
//!    ends, before anything is decided: a redelivery of the owner holds it
//!    while it reclaims, so a replay that would take a failed (or gone)
//!    owner's body over waits, and then reads the owner as that redelivery
//!    left it. A recent duplicate of the owner that is answered from the
//!    owner's row without a write (`crate::engine::receive`) reads
//!    the guard without the lock ([`owner_unlocked`]): it changes nothing a
//!    take-over decides on, and a take-over committing meanwhile is ordered
//!    after it. So does a replayed body whose answer the owner's committed
//!    state decides (a duplicate of a completed owner, in progress, ...):
//!    only a delivery that may take the body over locks it.
//!
//! Reads and writes only; the decision is the caller's. Rows are pruned by
//! maintenance after the source's retention (from `seen_at`), once their
//! key is gone.

use crate::claim::State;
use crate::jsonb::Jsonb;
use crate::spi::{arg, Conn, Snap, Statement};
use crate::time::timestamptz;
use pgrx::pg_sys::{BYTEAOID, TEXTOID, TIMESTAMPTZOID};

static INSERT: Statement = Statement::returning(
    crate::sql_statement!("replay_guards_insert.sql"),
    &[TEXTOID, BYTEAOID, TEXTOID, TIMESTAMPTZOID],
    &["inserted"],
);
static READ: Statement =
    Statement::returning(crate::sql_statement!("replay_guards_read.sql"), &[TEXTOID, BYTEAOID], &["idem_key"]);
static PEEK: Statement =
    Statement::returning(crate::sql_statement!("replay_guards_peek.sql"), &[TEXTOID, BYTEAOID], &["idem_key"]);
static OWNER: Statement = Statement::returning(
    crate::sql_statement!("replay_guards_owner.sql"),
    &[TEXTOID, TEXTOID],
    &["state", "result", "fingerprint", "queued"],
);
static TAKE_OVER: Statement = Statement::returning(
    crate::sql_statement!("replay_guards_take_over.sql"),
    &[TEXTOID, BYTEAOID, TEXTOID, TIMESTAMPTZOID],
    &["taken"],
);

/// What the guard of a body says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    /// The body belongs to the key that asked (new, or a redelivery of it).
    Ours,
    /// The body belongs to this other key; its guard row is locked by this
    /// transaction.
    Theirs(String),
    /// The row went (pruned) between the insert and the read: ask again.
    Gone,
}

/// Give the body `body_sha256` of `source` to `idem_key` if it has no
/// guard yet, else lock the guard and say whose it is. `now` in
/// microseconds (PostgreSQL epoch). [`insert`], then [`lock`].
pub fn claim(conn: &Conn<'_>, source: &str, body_sha256: &[u8], idem_key: &str, now: i64) -> Guard {
    if insert(conn, source, body_sha256, idem_key, now) {
        return Guard::Ours;
    }
    lock(conn, source, body_sha256, idem_key)
}

/// Give the body `body_sha256` of `source` to `idem_key` if it has no
/// guard yet (true). A body that has one is left alone: the insert finds
/// the committed row (waiting for a transaction inserting it) and writes
/// nothing, takes no lock and no transaction id.
/// On Citus, on the node that holds the source, the insert runs on the
/// source's shard itself (the local-shard fast path,
/// `crate::store::local_shard`): the same statement, without Citus's
/// planning of it.
pub fn insert(conn: &Conn<'_>, source: &str, body_sha256: &[u8], idem_key: &str, now: i64) -> bool {
    let on_shard = super::local_shard::replay_guards(conn, source).and_then(|shard| {
        let statement = INSERT.on_relation("webhook_dedup.replay_guards", shard)?;
        super::local_shard::trace(source, || {
            format!("the replay guard's insert runs on its shard (relation {})", shard.to_u32())
        });
        Some(statement)
    });
    let insert = on_shard.as_deref().unwrap_or(&INSERT);
    let inserted =
        conn.execute(insert, &[arg(source), arg(body_sha256), arg(idem_key), arg(timestamptz(now))], Snap::Statement);
    !inserted.is_empty()
}

/// Lock the guard of a body that has one (after [`insert`] found it) and
/// say whose it is.
pub fn lock(conn: &Conn<'_>, source: &str, body_sha256: &[u8], idem_key: &str) -> Guard {
    // The conflicting row is committed (the insert waited for it). Under
    // READ COMMITTED the locking read finds its newest version; under
    // REPEATABLE READ PostgreSQL raises 40001 when that is newer than the
    // snapshot, and a row inserted after it is not seen (Gone: the caller's
    // next insert conflicts again, and it gives up with 40001).
    let rows = conn.execute(&READ, &[arg(source), arg(body_sha256)], Snap::Statement);
    match (!rows.is_empty()).then(|| rows.get::<String>(0, 1)).flatten() {
        Some(owner) if owner == idem_key => Guard::Ours,
        Some(owner) => Guard::Theirs(owner),
        None => Guard::Gone,
    }
}

/// The key the body `body_sha256` of `source` belongs to, read without a
/// lock on the latest snapshot (a recent duplicate of that key is answered
/// with reads alone, `crate::engine::receive`); `None` when it has no guard.
pub fn owner_unlocked(conn: &Conn<'_>, source: &str, body_sha256: &[u8]) -> Option<String> {
    let rows = conn.execute(&PEEK, &[arg(source), arg(body_sha256)], Snap::Latest);
    (!rows.is_empty()).then(|| rows.get::<String>(0, 1)).flatten()
}

/// The key a body belongs to, as the guard decides on it.
#[derive(Debug)]
pub struct Owner {
    pub state: State,
    pub result: Option<Jsonb>,
    pub fingerprint: Option<Vec<u8>>,
    /// It holds a payload: `webhook_next` retries it when it fails.
    pub queued: bool,
}

/// `idem_key` of `source` as it is now (the latest committed state, read
/// after the guard's lock was granted), or `None` when it is gone.
pub fn owner(conn: &Conn<'_>, source: &str, idem_key: &str) -> Option<Owner> {
    let rows = conn.execute(&OWNER, &[arg(source), arg(idem_key)], Snap::Latest);
    if rows.is_empty() {
        return None;
    }
    let state: String = rows.get(0, 1).expect("state is NOT NULL");
    Some(Owner {
        state: State::parse(&state).unwrap_or_else(|| pgrx::error!("webhook_dedup: unknown stored state {state:?}")),
        result: rows.get_jsonb(0, 2),
        fingerprint: rows.get(0, 3),
        queued: rows.get(0, 4).unwrap_or(false),
    })
}

/// Give the body to `idem_key` (the caller holds the guard's lock, from
/// [`claim`]); `false` when the row is not there.
pub fn take_over(conn: &Conn<'_>, source: &str, body_sha256: &[u8], idem_key: &str, now: i64) -> bool {
    let rows = conn.execute(
        &TAKE_OVER,
        &[arg(source), arg(body_sha256), arg(idem_key), arg(timestamptz(now))],
        Snap::Statement,
    );
    !rows.is_empty()
}
