//! The key store: every read and write of `webhook_dedup.keys`,
//! `webhook_dedup.payloads` and `webhook_dedup.conflict_log`, as typed
//! functions over kept statements (`src/sql/statements/`). [`crate::api`]
//! and [`crate::maintenance`] call down into this module; the decisions
//! (what a delivery means, where a failure goes) are [`crate::claim`]'s.
//!
//! The concurrency protocol (the argument is in `docs/design.md`,
//! "Storage and concurrency"):
//!
//! 1. **A first delivery is one insert, arbitrated by the primary key.**
//!    [`claim::upsert`] and [`queue::enqueue`] are `INSERT ... ON CONFLICT
//!    (idem_key, source) DO UPDATE`: of two concurrent first deliveries, the
//!    second waits in the unique index for the first's transaction, then
//!    finds its row. No per-key advisory lock, so a transaction may claim
//!    any number of keys.
//! 2. **Every later write holds the key's row lock.** The upsert locks the
//!    row it finds (and counts the delivery in the same statement);
//!    [`transitions::lock`] and the queue's and the sweep's `FOR NO KEY
//!    UPDATE [SKIP LOCKED]` reads lock the rows they return. The decision is
//!    taken on the row read under that lock, and the write that follows
//!    names the key alone: nothing else can change the row in between.
//! 3. **Fencing is a condition of the write.** `webhook_complete` is one
//!    `UPDATE ... WHERE claim_token = $token AND state = 'processing'`;
//!    under READ COMMITTED a concurrent reclaim is waited for and the
//!    condition re-checked on the newest row.
//!
//! Under REPEATABLE READ and SERIALIZABLE, PostgreSQL itself raises 40001
//! when a row to lock or update changed after the transaction's snapshot;
//! [`visible_conflict`] gives the first delivery the same 40001 with this
//! extension's message when the key was stored after that snapshot.

pub mod archive;
pub mod cache;
pub mod citus;
pub mod claim;
pub mod claim_counts;
pub mod direct_writes;
pub mod expiry;
pub mod history;
mod index_predicates;
pub mod local_shard;
pub mod maintenance_runs;
pub mod outbox;
pub mod queue;
pub mod redrive;
pub mod replay_guards;
pub mod secrets;
pub mod signature_tokens;
pub mod sources;
pub mod transitions;
pub mod watermarks;

use crate::claim::{State, Stored};
use crate::error::{Error, Raise};
use crate::jsonb::Jsonb;
use crate::spi::{arg, Conn, Rows, Snap, Statement};
use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys::{self, TEXTARRAYOID, TEXTOID};
use pgrx::Uuid;

/// An idempotency key: 1 to 255 characters each, checked by the caller
/// ([`crate::key::check_bounded`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key<'a> {
    pub source: &'a str,
    pub idem_key: &'a str,
}

/// The columns of a key row, in the order every statement that returns one
/// lists them (checked when a statement first runs).
pub(crate) const KEY_ROW: &[&str] = &[
    "source",
    "idem_key",
    "state",
    "attempt",
    "claim_token",
    "lease_expires_at",
    "next_attempt_at",
    "fingerprint",
    "event_type",
    "result",
    "last_step",
    "first_seen_at",
    "due_at",
];

/// A key's row, as the statements of this module return it. Times are
/// microseconds since 2000-01-01 UTC.
#[derive(Debug, Clone)]
pub struct KeyRow {
    pub source: String,
    pub idem_key: String,
    pub state: State,
    pub attempt: i32,
    pub claim_token: Option<Uuid>,
    pub lease_expires_at: Option<i64>,
    pub next_attempt_at: Option<i64>,
    pub fingerprint: Option<Vec<u8>>,
    pub event_type: Option<String>,
    pub result: Option<Jsonb>,
    pub last_step: Option<String>,
    pub first_seen_at: i64,
    pub due_at: Option<i64>,
}

impl KeyRow {
    /// Row `row` of `rows`, whose columns start at `first` with [`KEY_ROW`].
    pub(crate) fn read(rows: &Rows<'_>, row: usize, first: i32) -> KeyRow {
        let col = |i: usize| first + i as i32;
        let ts = |i: usize| rows.get::<TimestampWithTimeZone>(row, col(i)).map(pg_sys::TimestampTz::from);
        let state_text: String = rows.get(row, col(2)).expect("state is NOT NULL");
        let state = State::parse(&state_text)
            .unwrap_or_else(|| pgrx::error!("webhook_dedup: unknown stored state {state_text:?}"));
        KeyRow {
            source: rows.get(row, col(0)).expect("source is NOT NULL"),
            idem_key: rows.get(row, col(1)).expect("idem_key is NOT NULL"),
            state,
            attempt: rows.get(row, col(3)).expect("attempt is NOT NULL"),
            claim_token: rows.get(row, col(4)),
            lease_expires_at: ts(5),
            next_attempt_at: ts(6),
            fingerprint: rows.get(row, col(7)),
            event_type: rows.get(row, col(8)),
            result: rows.get_jsonb(row, col(9)),
            last_step: rows.get(row, col(10)),
            first_seen_at: ts(11).expect("first_seen_at is NOT NULL"),
            due_at: ts(12),
        }
    }

    /// Every row of `rows`, whose columns start at 1 with [`KEY_ROW`].
    pub(crate) fn all(rows: &Rows<'_>) -> Vec<KeyRow> {
        (0..rows.len()).map(|i| KeyRow::read(rows, i, 1)).collect()
    }

    /// What the state machine's decisions need ([`crate::claim::decide`]).
    pub fn stored(&self) -> Stored {
        Stored {
            state: self.state,
            attempt: self.attempt,
            lease_expires_at: self.lease_expires_at,
            next_attempt_at: self.next_attempt_at,
            fingerprint: self.fingerprint.clone(),
        }
    }

    /// Whether `token` holds this key's lease.
    pub fn held_by(&self, token: &Uuid) -> bool {
        let held = self.claim_token.as_ref().map(|t| t.as_bytes().as_slice());
        crate::claim::holds_lease(self.state, held, token.as_bytes())
    }

    pub fn key(&self) -> Key<'_> {
        Key { source: &self.source, idem_key: &self.idem_key }
    }
}

/// What an upsert ([`claim::upsert`], [`queue::enqueue`]) found.
#[derive(Debug, Clone)]
pub enum Upserted {
    /// The key was new: this call stored it.
    Inserted,
    /// The key was known: its row (locked by this transaction), with this
    /// delivery already counted.
    Known(Box<KeyRow>),
}

impl Upserted {
    /// The one row an upsert statement returns: `inserted`, then the key row.
    fn read(rows: &Rows<'_>) -> Upserted {
        assert_eq!(rows.len(), 1, "an upsert returns one row");
        if rows.get::<bool>(0, 1).expect("inserted is not NULL") {
            Upserted::Inserted
        } else {
            Upserted::Known(Box::new(KeyRow::read(rows, 0, 2)))
        }
    }
}

/// The columns of an upsert's row.
const UPSERTED: &[&str] = &[
    "inserted",
    "source",
    "idem_key",
    "state",
    "attempt",
    "claim_token",
    "lease_expires_at",
    "next_attempt_at",
    "fingerprint",
    "event_type",
    "result",
    "last_step",
    "first_seen_at",
    "due_at",
];

static READ: Statement = Statement::returning(crate::sql_statement!("key_read.sql"), &[TEXTOID, TEXTOID], KEY_ROW);
static UNSEEN: Statement = Statement::returning(
    crate::sql_statement!("key_unseen.sql"),
    &[TEXTOID, TEXTARRAYOID, TEXTARRAYOID],
    &["event_id"],
);

/// The key's row on `snap`, without a lock.
pub fn read(conn: &Conn<'_>, key: Key<'_>, snap: Snap) -> Option<KeyRow> {
    let rows = conn.execute(&READ, &[arg(key.source), arg(key.idem_key)], snap);
    (!rows.is_empty()).then(|| KeyRow::read(&rows, 0, 1))
}

/// Of `event_ids` (distinct, in the provider's order) and `idem_keys`
/// (their keys, derived by the caller as `webhook_receive` derives them:
/// one per id, in the same order), the ids whose key `source` does not
/// have: one primary-key probe each, on the statement snapshot, in the
/// order given (`webhook_dedup.unseen`).
pub fn unseen(conn: &Conn<'_>, source: &str, event_ids: Vec<String>, idem_keys: Vec<String>) -> Vec<String> {
    let rows = conn.execute(&UNSEEN, &[arg(source), arg(event_ids), arg(idem_keys)], Snap::Statement);
    (0..rows.len()).filter_map(|r| rows.get::<String>(r, 1)).collect()
}

/// `key`'s row as the latest snapshot sees it, without a lock (the
/// bounded wait's look, [`crate::wait`]): through the primary key directly
/// ([`direct_writes::Session::look`], which also tells a version this transaction
/// wrote), else `key_read.sql` on the latest snapshot.
///
/// When no version is visible, a first delivery of the key may be
/// inserting it right now (two copies sent at the same moment): the
/// primary key is probed, which waits for such an inserting transaction
/// (a claim: it commits at once) without taking any lock, and the key is
/// looked at again. Otherwise the claim after the wait would meet that
/// insert, wait for it and answer `in_progress` without having waited for
/// the holder (found by review: 10 of 30 simultaneous pairs).
/// The SQL path (a Citus table written through SQL) has no such probe.
pub fn look(conn: &Conn<'_>, key: Key<'_>) -> Option<direct_writes::Looked> {
    match direct_writes::Session::open_to_look(conn, key.source) {
        Some(mut session) => {
            let mut looked = session.look(key);
            if looked.is_none() && session.locate(key).is_some() {
                looked = session.look(key);
            }
            session.close();
            looked
        }
        None => read(conn, key, Snap::Latest).map(|row| direct_writes::Looked { stored: row.stored(), ours: false }),
    }
}

/// [`look`] without waiting for a transaction inserting the key: `None`
/// while the key's first claim is uncommitted (what a call whose time ran
/// out may still read, `webhook_receive`).
pub fn look_now(conn: &Conn<'_>, key: Key<'_>) -> Option<direct_writes::Looked> {
    match direct_writes::Session::open_to_look(conn, key.source) {
        Some(mut session) => {
            let looked = session.look(key);
            session.close();
            looked
        }
        None => read(conn, key, Snap::Latest).map(|row| direct_writes::Looked { stored: row.stored(), ours: false }),
    }
}

/// Whether the transaction's isolation level reads one snapshot for the
/// whole transaction (REPEATABLE READ, SERIALIZABLE).
pub fn transaction_snapshot() -> bool {
    // SAFETY: reads a backend-global set for the current transaction.
    unsafe { pg_sys::XactIsoLevel >= pg_sys::XACT_REPEATABLE_READ as i32 }
}

/// Under REPEATABLE READ or SERIALIZABLE, raise 40001 when `key` exists
/// but was stored after the transaction's snapshot (a delivery that this
/// transaction cannot see must not be decided on: PostgreSQL would raise
/// the same error from the upsert, with a message that names no key).
/// Does nothing (and reads nothing) under READ COMMITTED.
pub fn visible_conflict(conn: &Conn<'_>, key: Key<'_>) {
    if !transaction_snapshot() {
        return;
    }
    if read(conn, key, Snap::Latest).is_some() && read(conn, key, Snap::Statement).is_none() {
        serialization_failure();
    }
}

/// 40001: the key changed after this transaction's snapshot.
pub fn serialization_failure() -> ! {
    Error::SerializationFailure {
        message: "could not change the key: it was changed by a concurrent transaction \
                  after this transaction's snapshot"
            .into(),
    }
    .raise()
}

thread_local! {
    /// This backend's token generator: ChaCha12 (the generator of `rand`'s
    /// `StdRng`) seeded with 32 bytes of the server's strong random source
    /// the first time a token is made. Seeded lazily, in the backend that
    /// uses it, never in the postmaster, so no two backends share a stream.
    /// `pg_strong_random` itself (OpenSSL's RAND_bytes) costs a claim about
    /// 2.5 µs per token; this costs nanoseconds, and is as unpredictable.
    static TOKENS: std::cell::RefCell<Option<rand_chacha::ChaCha12Rng>> = const { std::cell::RefCell::new(None) };
}

/// A random (version 4) UUID: a lease's claim token. See [`TOKENS`].
pub fn new_token() -> Uuid {
    use rand_chacha::rand_core::{RngCore, SeedableRng};
    let mut bytes = [0u8; 16];
    TOKENS.with_borrow_mut(|rng| {
        let rng = rng.get_or_insert_with(|| {
            let mut seed = [0u8; 32];
            // SAFETY: writes exactly 32 bytes into a 32-byte buffer.
            if !unsafe { pg_sys::pg_strong_random(seed.as_mut_ptr().cast(), seed.len()) } {
                pgrx::error!("webhook_dedup: could not seed the claim token generator");
            }
            rand_chacha::ChaCha12Rng::from_seed(seed)
        });
        rng.fill_bytes(&mut bytes);
    });
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    Uuid::from_bytes(bytes)
}
