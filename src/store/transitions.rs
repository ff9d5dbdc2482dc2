//! The writes after a claim: completion (fenced by the claim token in the
//! statement itself), and the transitions of a key the caller has locked
//! with [`lock`] (holders' failures, checkpoints, lease extensions,
//! operators' resolutions), and forgetting a key.

use super::direct_writes::{Col, Locked, Session};
use super::{serialization_failure, Key, KeyRow, KEY_ROW};
use crate::claim::State;
use crate::jsonb::Jsonb;
use crate::spi::{arg, Conn, Snap, Statement};
use crate::time::timestamptz;
use pgrx::pg_sys::{JSONBOID, TEXTOID, TIMESTAMPTZOID, UUIDOID};
use pgrx::{IntoDatum, Uuid};

static LOCK: Statement =
    Statement::returning(crate::sql_statement!("transitions_lock.sql"), &[TEXTOID, TEXTOID], KEY_ROW);
static COMPLETE: Statement = Statement::returning(
    crate::sql_statement!("transitions_complete.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, UUIDOID, JSONBOID, TIMESTAMPTZOID],
    &["event_type"],
);
static FAIL: Statement = Statement::new(
    crate::sql_statement!("transitions_fail.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID, TEXTOID],
);
static MARK_UNKNOWN: Statement =
    Statement::new(crate::sql_statement!("transitions_mark_unknown.sql"), &[TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID]);
static CHECKPOINT: Statement =
    Statement::new(crate::sql_statement!("transitions_checkpoint.sql"), &[TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID]);
static EXTEND: Statement = Statement::new(
    crate::sql_statement!("transitions_extend_lease.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID],
);
static RESOLVE: Statement = Statement::new(
    crate::sql_statement!("transitions_resolve.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, TIMESTAMPTZOID],
);
static FORGET: Statement = Statement::returning(
    crate::sql_statement!("transitions_forget.sql"),
    &[TEXTOID, TEXTOID],
    &["event_type", "first_seen_at"],
);
static SET_DUE: Statement =
    Statement::new(crate::sql_statement!("transitions_set_due.sql"), &[TEXTOID, TEXTOID, TIMESTAMPTZOID]);

/// A write to a key the caller holds locked must change exactly one row;
/// anything else means the lock protocol was broken (an internal error).
pub(crate) fn expect_one(changed: usize) {
    if changed != 1 {
        pgrx::error!("webhook_dedup: a write to a locked key changed {changed} rows");
    }
}

/// Lock the key's row for this transaction and read it: `None` when the
/// key does not exist. Waits for a concurrent writer of the key; under
/// REPEATABLE READ, 40001 when the key changed after the snapshot, and
/// 40001 too when it was stored after it (the transaction cannot see it).
pub fn lock(conn: &Conn<'_>, key: Key<'_>) -> Option<KeyRow> {
    let rows = conn.execute(&LOCK, &[arg(key.source), arg(key.idem_key)], Snap::Statement);
    if rows.is_empty() {
        super::visible_conflict(conn, key);
        return None;
    }
    Some(KeyRow::read(&rows, 0, 1))
}

/// What [`complete`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completed {
    /// The key is completed; its event type (for the metrics).
    Yes { event_type: Option<String> },
    /// The token does not hold the key's lease: nothing changed.
    Stale { event_type: Option<String> },
    /// There is no such key.
    Unknown,
}

/// Complete the key if `token` holds its lease, storing `result`:
/// `expires_at` is when maintenance looks at the completed key again (now
/// plus the source's retention). Without an SQL plan where the table
/// allows ([`super::direct_writes`]: the token checked on the version of the
/// key's row the statement would see, then the row locked and completed if
/// the token still holds it), else one guarded update (`transitions_complete.sql`:
/// the fencing is in its condition).
pub fn complete(
    conn: &Conn<'_>,
    key: Key<'_>,
    token: Uuid,
    now: i64,
    result: Option<Jsonb>,
    expires_at: i64,
) -> Completed {
    if let Some(session) = Session::open(conn, key.source) {
        return complete_direct(conn, session, key, token, now, result, expires_at);
    }
    let rows = conn.execute(
        &COMPLETE,
        &[
            arg(key.source),
            arg(key.idem_key),
            arg(timestamptz(now)),
            arg(token),
            arg(result),
            arg(timestamptz(expires_at)),
        ],
        Snap::Statement,
    );
    if rows.len() == 1 {
        return Completed::Yes { event_type: rows.get(0, 1) };
    }
    unmatched(conn, key, token)
}

/// `transitions_complete.sql` without an SQL plan: check the token on the version
/// of the key's row the statement would see (no lock for a stale token, as
/// the UPDATE's condition takes none), then lock the row (its newest
/// version), and complete it if `token` still holds its lease.
fn complete_direct(
    conn: &Conn<'_>,
    mut session: Session,
    key: Key<'_>,
    token: Uuid,
    now: i64,
    result: Option<Jsonb>,
    expires_at: i64,
) -> Completed {
    // The UPDATE refuses a table published for updates without a replica
    // identity when it starts, before it matches anything.
    session.check_updatable();
    if !session.visible_holder(key, &token) {
        session.close();
        return unmatched(conn, key, token);
    }
    let completed = loop {
        let Some(tid) = session.locate(key) else {
            // The version the snapshot sees is held, but the key is gone
            // now: under REPEATABLE READ the UPDATE meets the deletion of
            // the row it found (40001); under READ COMMITTED it re-checks
            // and matches nothing (the key is unknown).
            if super::transaction_snapshot() {
                serialization_failure();
            }
            break Completed::Unknown;
        };
        match session.lock(key, tid) {
            // deleted since the probe: look again (it is gone, or new)
            Locked::Gone => continue,
            Locked::Row(mut values, tid) => {
                let event_type = values.event_type();
                if !values.held_by(&token) {
                    break Completed::Stale { event_type };
                }
                let now = timestamptz(now);
                values.set(Col::State, State::Completed.as_str().into_datum());
                values.set(Col::Result, result.into_datum());
                values.set(Col::CompletedAt, now.into_datum());
                values.set(Col::LastSeenAt, now.into_datum());
                values.set(Col::LeaseExpiresAt, None);
                values.set(Col::DueAt, None);
                values.set(Col::ExpiresAt, timestamptz(expires_at).into_datum());
                values.set(Col::ClaimToken, None);
                session.update(tid, &values);
                break Completed::Yes { event_type };
            }
        }
    };
    session.close();
    completed
}

/// What a completion that matched no row (the UPDATE's condition, or the
/// direct path's check of the visible version) was: a stale token, an
/// unknown key, or (REPEATABLE READ) a lease this transaction's snapshot
/// cannot see (40001), by the key's latest committed row.
pub fn unmatched(conn: &Conn<'_>, key: Key<'_>, token: Uuid) -> Completed {
    match super::read(conn, key, Snap::Latest) {
        None => Completed::Unknown,
        Some(row) if row.held_by(&token) => serialization_failure(),
        Some(row) => Completed::Stale { event_type: row.event_type },
    }
}

/// Where a locked key goes: `failed` due at `next_attempt_at`, or
/// `dead_lettered` (`next_attempt_at` None), with `error` as `last_error`.
pub fn fail(conn: &Conn<'_>, key: Key<'_>, now: i64, state: State, next_attempt_at: Option<i64>, error: Option<&str>) {
    let rows = conn.execute(
        &FAIL,
        &[
            arg(key.source),
            arg(key.idem_key),
            arg(timestamptz(now)),
            arg(next_attempt_at.map(timestamptz)),
            arg(state.as_str()),
            arg(error),
        ],
        Snap::Statement,
    );
    expect_one(rows.len());
}

/// Dead-letter a locked key that is due again with no attempts left (its
/// holders kept dying without calling `webhook_fail`); `last_error` says
/// so ([`crate::claim::exhausted_error`]).
pub fn dead_letter_exhausted(conn: &Conn<'_>, found: &KeyRow, now: i64) {
    let error = crate::claim::exhausted_error(found.attempt);
    fail(conn, found.key(), now, State::DeadLettered, None, Some(&error));
}

/// The locked key's outcome is unknown (`detail` as `last_error`).
pub fn mark_unknown(conn: &Conn<'_>, key: Key<'_>, now: i64, detail: Option<&str>) {
    let rows = conn.execute(
        &MARK_UNKNOWN,
        &[arg(key.source), arg(key.idem_key), arg(timestamptz(now)), arg(detail)],
        Snap::Statement,
    );
    expect_one(rows.len());
}

/// The locked key's last completed step.
pub fn checkpoint(conn: &Conn<'_>, key: Key<'_>, now: i64, step: &str) {
    let rows = conn.execute(
        &CHECKPOINT,
        &[arg(key.source), arg(key.idem_key), arg(timestamptz(now)), arg(step)],
        Snap::Statement,
    );
    expect_one(rows.len());
}

/// The locked key's lease now ends at `until`.
pub fn extend_lease(conn: &Conn<'_>, key: Key<'_>, now: i64, until: i64) {
    let rows = conn.execute(
        &EXTEND,
        &[arg(key.source), arg(key.idem_key), arg(timestamptz(now)), arg(timestamptz(until))],
        Snap::Statement,
    );
    expect_one(rows.len());
}

/// An operator's resolution of a locked key.
#[derive(Debug, Clone, Copy)]
pub struct Resolution {
    pub now: i64,
    pub to: State,
    /// Stored when given (kept otherwise).
    pub result: Option<Jsonb>,
    /// When the key is due: now for `failed` and `pending`.
    pub due_at: Option<i64>,
    /// For `completed`: when maintenance looks at it again.
    pub expires_at: Option<i64>,
}

pub fn resolve(conn: &Conn<'_>, key: Key<'_>, r: &Resolution) {
    let rows = conn.execute(
        &RESOLVE,
        &[
            arg(key.source),
            arg(key.idem_key),
            arg(timestamptz(r.now)),
            arg(r.to.as_str()),
            arg(r.result),
            arg(r.due_at.map(timestamptz)),
            arg(r.expires_at.map(timestamptz)),
        ],
        Snap::Statement,
    );
    expect_one(rows.len());
}

/// Delete the key and its payload (and, on one server, its archived
/// deliveries). `None` when there was no such key; else the key's event
/// type.
pub fn forget(conn: &Conn<'_>, key: Key<'_>) -> Option<Option<String>> {
    // Locked first, so that the delete (a later statement, a newer
    // snapshot) sees what a writer it waited for committed: a redrive's
    // payload for the key would otherwise be left behind, keyless.
    lock(conn, key)?;
    let rows = conn.execute(&FORGET, &[arg(key.source), arg(key.idem_key)], Snap::Statement);
    if rows.is_empty() {
        super::visible_conflict(conn, key);
        return None;
    }
    if !crate::citus::keys_distributed() {
        let first_seen_at: Option<pgrx::datum::TimestampWithTimeZone> = rows.get(0, 2);
        if let Some(at) = first_seen_at {
            super::archive::forget(conn, key, at);
        }
    }
    Some(rows.get(0, 1))
}

/// Set the locked key's `due_at` (a repair: see `webhook_next`).
pub fn set_due(conn: &Conn<'_>, key: Key<'_>, due_at: Option<i64>) {
    let rows =
        conn.execute(&SET_DUE, &[arg(key.source), arg(key.idem_key), arg(due_at.map(timestamptz))], Snap::Statement);
    expect_one(rows.len());
}
