//! Bulk redrive's reads and writes (`webhook_dedup.redrives`,
//! `webhook_dedup.redrive_keys`): a run matched and recorded, the running
//! runs and their next keys, a key locked, given its payload and moved
//! back to due, the run's progress, a cancel, old runs pruned. What to do
//! with each key is [`crate::maintenance::redrive`]'s.

use super::Key;
use crate::spi::{arg, Conn, Snap, Statement};
use crate::time::timestamptz;
use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys::{self, BOOLOID, INT8OID, INTERVALOID, TEXTARRAYOID, TEXTOID, TIMESTAMPTZOID};

static MATCH: Statement = Statement::returning(
    crate::sql_statement!("redrive_match.sql"),
    &[
        TEXTOID,
        TEXTARRAYOID,
        BOOLOID,
        TIMESTAMPTZOID,
        TIMESTAMPTZOID,
        TEXTARRAYOID,
        INT8OID,
        BOOLOID,
        TIMESTAMPTZOID,
        TEXTOID,
    ],
    &["run", "matched", "without_payload"],
);
static RUNNING: Statement =
    Statement::returning(crate::sql_statement!("redrive_running.sql"), &[], &["id", "source", "states", "conflicts"]);
static TODO: Statement = Statement::returning(
    crate::sql_statement!("redrive_todo.sql"),
    &[INT8OID, INT8OID],
    &["n", "idem_key", "conflict_at"],
);
static LOCK_KEY: Statement = Statement::returning(
    crate::sql_statement!("redrive_lock_key.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID],
    &["state", "first_seen_at", "queued", "redacted", "done"],
);
static KEY_EXISTS: Statement =
    Statement::returning(crate::sql_statement!("redrive_key_exists.sql"), &[TEXTOID, TEXTOID], &["present"]);
static PAYLOAD: Statement = Statement::returning(
    crate::sql_statement!("redrive_payload.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, BOOLOID],
    &["copied"],
);
static MOVE: Statement = Statement::new(
    crate::sql_statement!("redrive_move.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID],
);
static OUTCOME: Statement = Statement::new(crate::sql_statement!("redrive_outcome.sql"), &[INT8OID, INT8OID, TEXTOID]);
static PROGRESS: Statement =
    Statement::new(crate::sql_statement!("redrive_progress.sql"), &[INT8OID, INT8OID, INT8OID, TIMESTAMPTZOID]);
static CANCEL: Statement = Statement::returning(
    crate::sql_statement!("redrive_cancel.sql"),
    &[INT8OID, TIMESTAMPTZOID, TEXTOID],
    &["was", "moved"],
);
static PRUNE: Statement = Statement::returning(
    crate::sql_statement!("redrive_prune.sql"),
    &[TIMESTAMPTZOID, INTERVALOID, INT8OID],
    &["count"],
);

/// What a redrive matches (the arguments of `webhook_dedup.redrive`,
/// checked).
#[derive(Debug, Clone)]
pub struct Filter<'a> {
    pub source: &'a str,
    /// Key states (dead_lettered, failed, unknown_outcome).
    pub states: Vec<String>,
    /// Keys with an archived conflicting delivery too.
    pub conflicts: bool,
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub event_types: Option<Vec<String>>,
    pub max: Option<i64>,
}

/// Count the keys `f` matches (`dry_run`), or record a run for them
/// started by `by` at `now`.
pub fn start(conn: &Conn<'_>, f: &Filter<'_>, dry_run: bool, now: i64, by: &str) -> Matched {
    let rows = conn.execute(
        &MATCH,
        &[
            arg(f.source),
            arg(f.states.clone()),
            arg(f.conflicts),
            arg(f.since.map(timestamptz)),
            arg(f.until.map(timestamptz)),
            arg(f.event_types.clone()),
            arg(f.max),
            arg(dry_run),
            arg(timestamptz(now)),
            arg(by),
        ],
        Snap::Statement,
    );
    Matched { run: rows.get(0, 1), keys: rows.get(0, 2).unwrap_or(0), without_payload: rows.get(0, 3).unwrap_or(0) }
}

/// What a redrive matched ([`start`]).
#[derive(Debug, Clone, Copy)]
pub struct Matched {
    /// The run recorded; `None` for a dry run.
    pub run: Option<i64>,
    pub keys: i64,
    /// Of `keys`, those the move will skip as `no_payload` (as matched:
    /// redacted, or neither queued nor archived).
    pub without_payload: i64,
}

/// A running run, locked until the transaction ends.
#[derive(Debug, Clone)]
pub struct Run {
    pub id: i64,
    pub source: String,
    pub states: Vec<String>,
    pub conflicts: bool,
}

/// The running runs not held by another pass, oldest first, locked.
pub fn running(conn: &Conn<'_>) -> Vec<Run> {
    let rows = conn.execute(&RUNNING, &[], Snap::Statement);
    (0..rows.len())
        .map(|r| Run {
            id: rows.get(r, 1).expect("id is NOT NULL"),
            source: rows.get(r, 2).expect("source is NOT NULL"),
            states: rows.get(r, 3).unwrap_or_default(),
            conflicts: rows.get(r, 4).unwrap_or(false),
        })
        .collect()
}

/// A key of a run still to do.
#[derive(Debug, Clone)]
pub struct Item {
    pub n: i64,
    pub idem_key: String,
    /// A conflict's arrival (its archived delivery is what to process).
    pub conflict_at: Option<i64>,
}

/// The next `limit` keys of run `run` still to do, in order.
pub fn todo(conn: &Conn<'_>, run: i64, limit: i64) -> Vec<Item> {
    let rows = conn.execute(&TODO, &[arg(run), arg(limit)], Snap::Statement);
    (0..rows.len())
        .map(|r| Item {
            n: rows.get(r, 1).expect("n is NOT NULL"),
            idem_key: rows.get(r, 2).expect("idem_key is NOT NULL"),
            conflict_at: rows.get::<TimestampWithTimeZone>(r, 3).map(pg_sys::TimestampTz::from),
        })
        .collect()
}

/// A key as a redrive found it.
#[derive(Debug, Clone)]
pub enum Found {
    /// Locked until the transaction ends: its state, first arrival,
    /// whether the queue has its payload, whether it was redacted, and
    /// (a conflict) whether it has the conflict's content already.
    Locked { state: String, first_seen_at: i64, queued: bool, redacted: bool, done: bool },
    /// Held by another transaction right now.
    Held,
    /// Deleted.
    Gone,
}

/// Lock `key` if nobody holds it (`conflict_at`: the conflict a run would
/// process).
pub fn lock(conn: &Conn<'_>, key: Key<'_>, conflict_at: Option<i64>) -> Found {
    let rows = conn.execute(
        &LOCK_KEY,
        &[arg(key.source), arg(key.idem_key), arg(conflict_at.map(timestamptz))],
        Snap::Statement,
    );
    if !rows.is_empty() {
        return Found::Locked {
            state: rows.get(0, 1).expect("state is NOT NULL"),
            first_seen_at: rows
                .get::<TimestampWithTimeZone>(0, 2)
                .map(pg_sys::TimestampTz::from)
                .expect("first_seen_at is NOT NULL"),
            queued: rows.get(0, 3).unwrap_or(false),
            redacted: rows.get(0, 4).unwrap_or(false),
            done: rows.get(0, 5).unwrap_or(false),
        };
    }
    let rows = conn.execute(&KEY_EXISTS, &[arg(key.source), arg(key.idem_key)], Snap::Statement);
    if rows.get::<bool>(0, 1).unwrap_or(false) {
        Found::Held
    } else {
        Found::Gone
    }
}

/// Copy the archived delivery of `key` that arrived at `at` (a conflicting
/// one with `conflict`) into the queue's payloads; whether there was one.
pub fn copy_payload(conn: &Conn<'_>, key: Key<'_>, at: i64, conflict: bool) -> bool {
    let rows = conn.execute(
        &PAYLOAD,
        &[arg(key.source), arg(key.idem_key), arg(timestamptz(at)), arg(conflict)],
        Snap::Statement,
    );
    rows.get::<bool>(0, 1).unwrap_or(false)
}

/// Make the locked `key` pending and due at `now`, moved by `run` (with
/// the fingerprint of the conflict that arrived at `conflict_at`).
pub fn move_key(conn: &Conn<'_>, key: Key<'_>, now: i64, run: i64, conflict_at: Option<i64>) {
    let rows = conn.execute(
        &MOVE,
        &[arg(key.source), arg(key.idem_key), arg(timestamptz(now)), arg(run), arg(conflict_at.map(timestamptz))],
        Snap::Statement,
    );
    super::transitions::expect_one(rows.len());
}

/// Record what became of key `n` of `run`.
pub fn outcome(conn: &Conn<'_>, run: i64, n: i64, outcome: &str) {
    conn.execute(&OUTCOME, &[arg(run), arg(n), arg(outcome)], Snap::Statement);
}

/// Count a batch of `run`; the run is done when no key is left.
pub fn progress(conn: &Conn<'_>, run: i64, moved: i64, skipped: i64, now: i64) {
    conn.execute(&PROGRESS, &[arg(run), arg(moved), arg(skipped), arg(timestamptz(now))], Snap::Statement);
}

/// Cancel `run` (waiting for a batch in flight): (its status before, keys
/// it moved), None for an unknown run.
pub fn cancel(conn: &Conn<'_>, run: i64, now: i64, by: &str) -> Option<(String, i64)> {
    let rows = conn.execute(&CANCEL, &[arg(run), arg(timestamptz(now)), arg(by)], Snap::Statement);
    if rows.is_empty() {
        return None;
    }
    Some((rows.get(0, 1).expect("status is NOT NULL"), rows.get(0, 2).unwrap_or(0)))
}

/// Delete up to `batch` finished runs past their source's retention, with
/// their keys; how many rows.
pub fn prune(conn: &Conn<'_>, now: i64, default_retention: pgrx::datum::Interval, batch: i64) -> i64 {
    let rows = conn.execute(&PRUNE, &[arg(timestamptz(now)), arg(default_retention), arg(batch)], Snap::Statement);
    rows.get::<i64>(0, 1).unwrap_or(0)
}
