//! The outbox's reads and writes (`webhook_dedup.outbox`; decisions in
//! [`crate::outbox`] and [`crate::claim`]). The protocol is the keys'
//! ([`super`]): a new intent is one insert, fenced by the key's lease in
//! the same statement and arbitrated by the unique (source, idem_key,
//! operation); every later write holds the intent's row lock (taken by
//! [`lock`], or by the senders' `FOR NO KEY UPDATE SKIP LOCKED` reads), or
//! carries its fencing in its condition ([`ack`]).

use super::{Key, KeyRow};
use crate::claim::{State, Stored};
use crate::jsonb::Jsonb;
use crate::spi::{arg, Conn, Rows, Snap, Statement};
use crate::time::timestamptz;
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::pg_sys::{self, BOOLOID, INT4OID, INT8OID, INTERVALOID, JSONBOID, TEXTOID, TIMESTAMPTZOID, UUIDOID};
use pgrx::Uuid;

/// The columns of an intent row, in the order every statement that returns
/// one lists them (checked when a statement first runs).
const INTENT_ROW: &[&str] = &[
    "id",
    "source",
    "idem_key",
    "operation",
    "target",
    "request",
    "downstream_key",
    "downstream_idempotent",
    "state",
    "attempt",
    "lease_token",
    "lease_expires_at",
    "next_attempt_at",
    "due_at",
];

static PUT: Statement = Statement::returning(
    crate::sql_statement!("outbox_put.sql"),
    &[TEXTOID, TEXTOID, UUIDOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID, BOOLOID, TIMESTAMPTZOID],
    &["id"],
);
static FIND: Statement =
    Statement::returning(crate::sql_statement!("outbox_find.sql"), &[TEXTOID, TEXTOID, TEXTOID], &["id"]);
static LOCK: Statement = Statement::returning(crate::sql_statement!("outbox_lock.sql"), &[INT8OID], INTENT_ROW);
// Generic plans: see Statement::generic_plan (LIMIT $n on the index order).
static TAKE: Statement =
    Statement::returning(crate::sql_statement!("outbox_take.sql"), &[TIMESTAMPTZOID, INT4OID], INTENT_ROW)
        .generic_plan();
static TAKE_OF_TARGET: Statement = Statement::returning(
    crate::sql_statement!("outbox_take_of_target.sql"),
    &[TIMESTAMPTZOID, TEXTOID, INT4OID],
    INTENT_ROW,
)
.generic_plan();
static LEASE: Statement = Statement::new(
    crate::sql_statement!("outbox_lease.sql"),
    &[INT8OID, INT4OID, UUIDOID, TIMESTAMPTZOID, TIMESTAMPTZOID],
);
static ACK: Statement = Statement::returning(
    crate::sql_statement!("outbox_ack.sql"),
    &[INT8OID, UUIDOID, JSONBOID, TIMESTAMPTZOID],
    &["source"],
);
static SET_STATE: Statement = Statement::new(
    crate::sql_statement!("outbox_set_state.sql"),
    &[INT8OID, TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID, TEXTOID],
);
static RESOLVE: Statement = Statement::new(
    crate::sql_statement!("outbox_resolve.sql"),
    &[INT8OID, TIMESTAMPTZOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, INT4OID],
);
static LAPSED: Statement =
    Statement::returning(crate::sql_statement!("outbox_lapsed.sql"), &[TIMESTAMPTZOID, INT8OID], INTENT_ROW);
static PRUNE: Statement = Statement::returning(
    crate::sql_statement!("outbox_prune.sql"),
    &[TIMESTAMPTZOID, INTERVALOID, INT8OID, INTERVALOID],
    &["count"],
);

/// An intent's row. Times are microseconds since 2000-01-01 UTC.
#[derive(Debug, Clone)]
pub struct IntentRow {
    pub id: i64,
    pub source: String,
    pub idem_key: String,
    pub operation: String,
    pub target: String,
    pub request: Option<Jsonb>,
    pub downstream_key: String,
    pub downstream_idempotent: bool,
    pub state: State,
    pub attempt: i32,
    pub lease_token: Option<Uuid>,
    pub lease_expires_at: Option<i64>,
    pub next_attempt_at: Option<i64>,
    pub due_at: Option<i64>,
}

impl IntentRow {
    fn read(rows: &Rows<'_>, row: usize) -> IntentRow {
        let ts = |c: i32| rows.get::<TimestampWithTimeZone>(row, c).map(pg_sys::TimestampTz::from);
        let state_text: String = rows.get(row, 9).expect("state is NOT NULL");
        let state = State::parse(&state_text)
            .unwrap_or_else(|| pgrx::error!("webhook_dedup: unknown stored intent state {state_text:?}"));
        IntentRow {
            id: rows.get(row, 1).expect("id is NOT NULL"),
            source: rows.get(row, 2).expect("source is NOT NULL"),
            idem_key: rows.get(row, 3).expect("idem_key is NOT NULL"),
            operation: rows.get(row, 4).expect("operation is NOT NULL"),
            target: rows.get(row, 5).expect("target is NOT NULL"),
            request: rows.get_jsonb(row, 6),
            downstream_key: rows.get(row, 7).expect("downstream_key is NOT NULL"),
            downstream_idempotent: rows.get(row, 8).expect("downstream_idempotent is NOT NULL"),
            state,
            attempt: rows.get(row, 10).expect("attempt is NOT NULL"),
            lease_token: rows.get(row, 11),
            lease_expires_at: ts(12),
            next_attempt_at: ts(13),
            due_at: ts(14),
        }
    }

    fn all(rows: &Rows<'_>) -> Vec<IntentRow> {
        (0..rows.len()).map(|i| IntentRow::read(rows, i)).collect()
    }

    /// What the claim state machine needs of the intent ([`crate::claim::decide`]).
    pub fn stored(&self) -> Stored {
        Stored {
            state: self.state,
            attempt: self.attempt,
            lease_expires_at: self.lease_expires_at,
            next_attempt_at: self.next_attempt_at,
            fingerprint: None,
        }
    }

    /// Whether `token` holds the intent's lease ([`crate::claim::holds_lease`]).
    pub fn held_by(&self, token: &Uuid) -> bool {
        let held = self.lease_token.as_ref().map(|t| t.as_bytes().as_slice());
        crate::claim::holds_lease(self.state, held, token.as_bytes())
    }
}

/// An intent to write.
#[derive(Debug, Clone, Copy)]
pub struct Intent<'a> {
    pub key: Key<'a>,
    pub claim_token: Uuid,
    pub operation: &'a str,
    pub target: &'a str,
    pub request: Jsonb,
    pub downstream_key: &'a str,
    pub downstream_idempotent: bool,
    pub now: i64,
}

/// What [`put`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Put {
    /// A new intent, with its id.
    Written(i64),
    /// The operation of this key has an intent already: its id.
    Existing(i64),
    /// The claim token does not hold the key's lease: nothing written.
    Stale,
    /// There is no such key.
    UnknownKey,
}

/// Write the intent if its claim token holds the key's lease: one
/// statement in the common case (`outbox_put.sql`). When it inserted
/// nothing, the key is locked and read to tell a stale token (or an
/// unknown key) from an operation that has its intent already.
pub fn put(conn: &Conn<'_>, i: &Intent<'_>) -> Put {
    let insert = || {
        let rows = conn.execute(
            &PUT,
            &[
                arg(i.key.source),
                arg(i.key.idem_key),
                arg(i.claim_token),
                arg(i.operation),
                arg(i.target),
                arg(i.request),
                arg(i.downstream_key),
                arg(i.downstream_idempotent),
                arg(timestamptz(i.now)),
            ],
            Snap::Statement,
        );
        (rows.len() == 1).then(|| rows.get::<i64>(0, 1).expect("id is NOT NULL"))
    };
    if let Some(id) = insert() {
        return Put::Written(id);
    }
    let found: Option<KeyRow> = super::transitions::lock(conn, i.key);
    match found {
        None => Put::UnknownKey,
        Some(key) if !key.held_by(&i.claim_token) => Put::Stale,
        Some(_) => {
            let rows =
                conn.execute(&FIND, &[arg(i.key.source), arg(i.key.idem_key), arg(i.operation)], Snap::Statement);
            if rows.len() == 1 {
                return Put::Existing(rows.get(0, 1).expect("id is NOT NULL"));
            }
            // The intent it conflicted with went in between (maintenance
            // pruned a delivered one past retention): the key is ours and
            // locked now, so the insert is decided by this transaction.
            match insert() {
                Some(id) => Put::Written(id),
                None => pgrx::error!("webhook_dedup: an intent that conflicted on insert is not there to read"),
            }
        }
    }
}

/// Lock the intent's row for this transaction and read it (`None`: no such
/// intent). Waits for a concurrent writer of the intent.
pub fn lock(conn: &Conn<'_>, id: i64) -> Option<IntentRow> {
    let rows = conn.execute(&LOCK, &[arg(id)], Snap::Statement);
    (!rows.is_empty()).then(|| IntentRow::read(&rows, 0))
}

/// Up to `limit` intents due at `now` (of `target`, or of every target),
/// oldest due first, each locked for this transaction; intents locked by
/// others are skipped, not waited for.
pub fn take_due(conn: &Conn<'_>, now: i64, target: Option<&str>, limit: i32) -> Vec<IntentRow> {
    let rows = match target {
        Some(target) => {
            conn.execute(&TAKE_OF_TARGET, &[arg(timestamptz(now)), arg(target), arg(limit)], Snap::Statement)
        }
        None => conn.execute(&TAKE, &[arg(timestamptz(now)), arg(limit)], Snap::Statement),
    };
    IntentRow::all(&rows)
}

/// Lease a locked intent to a sender as attempt `attempt`, until `until`.
pub fn lease(conn: &Conn<'_>, id: i64, attempt: i32, token: Uuid, until: i64, now: i64) {
    let rows = conn.execute(
        &LEASE,
        &[arg(id), arg(attempt), arg(token), arg(timestamptz(until)), arg(timestamptz(now))],
        Snap::Statement,
    );
    super::transitions::expect_one(rows.len());
}

/// Deliver the intent if `token` holds its lease: its source when it did
/// (for the metrics), `None` when nothing matched (a stale token or an
/// unknown intent; the caller reads the row to tell which).
pub fn ack(conn: &Conn<'_>, id: i64, token: Uuid, response: Option<Jsonb>, now: i64) -> Option<String> {
    let rows = conn.execute(&ACK, &[arg(id), arg(token), arg(response), arg(timestamptz(now))], Snap::Statement);
    (rows.len() == 1).then(|| rows.get(0, 1).expect("source is NOT NULL"))
}

/// Where a locked intent goes: `failed` due at `next_attempt_at`,
/// `dead_lettered` or `unknown_outcome` (`next_attempt_at` None), with
/// `error` as `last_error`.
pub fn set_state(conn: &Conn<'_>, id: i64, now: i64, state: State, next_attempt_at: Option<i64>, error: Option<&str>) {
    let rows = conn.execute(
        &SET_STATE,
        &[arg(id), arg(timestamptz(now)), arg(state.as_str()), arg(next_attempt_at.map(timestamptz)), arg(error)],
        Snap::Statement,
    );
    super::transitions::expect_one(rows.len());
}

/// An operator's resolution of a locked intent: `to`, with `response`
/// stored when given, due at `due_at` (failed, pending), its attempt
/// becoming `attempt`.
pub fn resolve(
    conn: &Conn<'_>,
    id: i64,
    now: i64,
    to: State,
    response: Option<Jsonb>,
    due_at: Option<i64>,
    attempt: i32,
) {
    let rows = conn.execute(
        &RESOLVE,
        &[arg(id), arg(timestamptz(now)), arg(to.as_str()), arg(response), arg(due_at.map(timestamptz)), arg(attempt)],
        Snap::Statement,
    );
    super::transitions::expect_one(rows.len());
}

/// Up to `limit` intents whose sender's lease lapsed at `now`, oldest
/// first, each locked (maintenance's sweep).
pub fn lapsed(conn: &Conn<'_>, now: i64, limit: i64) -> Vec<IntentRow> {
    IntentRow::all(&conn.execute(&LAPSED, &[arg(timestamptz(now)), arg(limit)], Snap::Statement))
}

/// Delete up to `limit` delivered intents past their source's retention
/// (`default_us` for sources without their own; `shortest_us` the
/// shortest of any, an index bound). Returns how many went.
pub fn prune(conn: &Conn<'_>, now: i64, default_us: i64, shortest_us: i64, limit: i64) -> i64 {
    let rows = conn.execute(
        &PRUNE,
        &[
            arg(timestamptz(now)),
            arg(Interval::from_micros(default_us)),
            arg(limit),
            arg(Interval::from_micros(shortest_us)),
        ],
        Snap::Statement,
    );
    rows.get(0, 1).unwrap_or(0)
}
