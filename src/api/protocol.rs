//! The one protocol every function that writes a key follows (the argument
//! is in `docs/design.md`, "Atomicity: one lock per key"):
//! 1. take the key's transaction-scoped advisory lock ([`lock_key`]), so all
//!    writers of one key are serialised across every partition;
//! 2. look the key up on the *latest* snapshot, across the live partitions
//!    ([`lookup`]; at most one row exists: only lock holders insert, and
//!    they insert only after seeing none);
//! 3. decide in pure Rust ([`crate::claim`]), then apply one write to that
//!    row ([`expect_one`]) or insert a new one.
//!
//! Under REPEATABLE READ / SERIALIZABLE the write runs on the transaction
//! snapshot; when the row the latest snapshot found is invisible to it
//! (committed by someone else after the snapshot was taken), the write
//! touches nothing and [`expect_one`] raises 40001 instead of acting on a
//! state the transaction cannot see.

use crate::claim::{self, State, Stored};
use crate::error::{required, Error, OrRaise};
use crate::jsonb::Jsonb;
use crate::key::check_bounded;
use crate::spi::{arg, Conn, Rows, Snap, Statement};
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::pg_sys;
use pgrx::Uuid;

/// `objsubid` of this extension's advisory locks in `pg_locks` (`'WD'`);
/// `pg_advisory_lock()` uses 1 and 2, so callers' own advisory locks never
/// collide with ours.
pub const LOCK_CLASS: u16 = 0x5744;

fn key_tag(source: &str, idem_key: &str) -> pg_sys::LOCKTAG {
    let id = claim::lock_id(source, idem_key);
    // As SET_LOCKTAG_ADVISORY in PostgreSQL's storage/lock.h.
    pg_sys::LOCKTAG {
        // SAFETY: a backend-global set at connection; read-only here.
        locktag_field1: unsafe { pg_sys::MyDatabaseId.to_u32() },
        locktag_field2: (id >> 32) as u32,
        locktag_field3: id as u32,
        locktag_field4: LOCK_CLASS,
        locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
        locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
    }
}

/// Take the advisory lock of (`source`, `idem_key`) until the transaction
/// ends, waiting for its holder if there is one.
pub(crate) fn lock_key(source: &str, idem_key: &str) {
    let tag = key_tag(source, idem_key);
    // SAFETY: a fully initialised tag; LockAcquire waits (dontWait = false)
    // and raises on deadlock, so it returns only with the lock held.
    unsafe {
        pg_sys::LockAcquire(&tag, pg_sys::ExclusiveLock as pg_sys::LOCKMODE, false, false);
    }
}

/// Take the key's lock if nobody holds it; false (without waiting) if
/// somebody does.
pub(crate) fn try_lock_key(source: &str, idem_key: &str) -> bool {
    let tag = key_tag(source, idem_key);
    // SAFETY: as in lock_key, with dontWait = true.
    unsafe {
        pg_sys::LockAcquire(&tag, pg_sys::ExclusiveLock as pg_sys::LOCKMODE, false, true)
            != pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL
    }
}

/// Release a key's lock before the transaction ends (for a key
/// `webhook_next` tried and did not take, so that it does not hold it for
/// the rest of the caller's transaction).
pub(crate) fn unlock_key(source: &str, idem_key: &str) {
    let tag = key_tag(source, idem_key);
    // SAFETY: the tag of a lock this transaction holds; LockRelease only
    // warns (never errors) when it is not held.
    unsafe {
        pg_sys::LockRelease(&tag, pg_sys::ExclusiveLock as pg_sys::LOCKMODE, false);
    }
}

/// A random (version 4) UUID from the server's strong random source.
pub(crate) fn new_token() -> Uuid {
    let mut bytes = [0u8; 16];
    // SAFETY: writes exactly 16 bytes into a 16-byte buffer.
    let ok = unsafe { pg_sys::pg_strong_random(bytes.as_mut_ptr().cast(), bytes.len()) };
    if !ok {
        pgrx::error!("webhook_dedup: could not generate a random claim token");
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    Uuid::from_bytes(bytes)
}

/// The key named by a call: both parts present (22004) and bounded (22023).
pub(crate) fn key_args<'a>(source: Option<&'a str>, idem_key: Option<&'a str>) -> (&'a str, &'a str) {
    let source = required(source, "source");
    let idem_key = required(idem_key, "idem_key");
    check_bounded("source", source).or_raise();
    check_bounded("idem_key", idem_key).or_raise();
    (source, idem_key)
}

/// A lease length given as an interval: positive, at most 365 days, no
/// months (22023 otherwise).
pub(crate) fn lease_arg(lease: Interval) -> i64 {
    crate::time::duration_us(lease, "lease").and_then(claim::check_lease_us).or_raise()
}

static LOOKUP: Statement = Statement::new(crate::sql_statement!("key_lookup.sql"), &[pg_sys::TEXTOID, pg_sys::TEXTOID]);

/// The source's settings from `webhook_dedup.sources` (NULL falls back to
/// the GUCs).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SourceSettings {
    pub lease: Option<Interval>,
    pub max_attempts: Option<i32>,
}

impl SourceSettings {
    /// The lease a claim gets when it passes none. Converted only when
    /// needed, so that a bad row in `webhook_dedup.sources` fails only the
    /// calls that use it (22023), never every call of the source.
    pub fn default_lease_us(&self) -> i64 {
        match self.lease {
            Some(lease) => crate::time::duration_us(lease, "webhook_dedup.sources.lease").or_raise(),
            None => crate::guc::default_lease_us(),
        }
    }

    pub fn max_attempts(&self) -> i32 {
        self.max_attempts.unwrap_or_else(crate::guc::max_attempts)
    }
}

/// A key's row as the look-up returns it.
pub(crate) struct Row {
    pub stored: Stored,
    pub partition_at: TimestampWithTimeZone,
    pub claim_token: Option<Uuid>,
    pub result: Option<Jsonb>,
    pub last_step: Option<String>,
    pub first_seen_at: TimestampWithTimeZone,
    pub event_type: Option<String>,
    pub due_at: Option<i64>,
}

impl Row {
    /// Whether `token` holds this key's lease.
    pub fn held_by(&self, token: &Uuid) -> bool {
        let held = self.claim_token.as_ref().map(|t| t.as_bytes().as_slice());
        claim::holds_lease(self.stored.state, held, token.as_bytes())
    }
}

/// Look (`source`, `idem_key`) up on the latest snapshot, with its source's
/// settings. Call with the key's lock held.
pub(crate) fn lookup(conn: &Conn<'_>, source: &str, idem_key: &str) -> (Option<Row>, SourceSettings) {
    let rows = conn.execute(&LOOKUP, &[arg(source), arg(idem_key)], Snap::Latest);
    if rows.len() != 1 {
        pgrx::error!("webhook_dedup: key ({source}, {idem_key}) is stored {} times", rows.len());
    }
    let ts = |rows: &Rows, col| rows.get::<TimestampWithTimeZone>(0, col).map(pg_sys::TimestampTz::from);
    let settings = SourceSettings { lease: rows.get::<Interval>(0, 12), max_attempts: rows.get(0, 13) };
    let Some(state_text) = rows.get::<String>(0, 1) else {
        return (None, settings);
    };
    let state =
        State::parse(&state_text).unwrap_or_else(|| pgrx::error!("webhook_dedup: unknown stored state {state_text:?}"));
    let row = Row {
        stored: Stored {
            state,
            attempt: rows.get(0, 2).expect("attempt is NOT NULL"),
            lease_expires_at: ts(&rows, 3),
            next_attempt_at: ts(&rows, 4),
            fingerprint: rows.get(0, 5),
        },
        partition_at: rows.get(0, 6).expect("partition_at is NOT NULL"),
        claim_token: rows.get(0, 7),
        result: rows.get_jsonb(0, 8),
        last_step: rows.get(0, 9),
        first_seen_at: rows.get(0, 10).expect("first_seen_at is NOT NULL"),
        event_type: rows.get(0, 11),
        due_at: ts(&rows, 14),
    };
    (Some(row), settings)
}

/// The row a call names must exist: P0002 otherwise.
pub(crate) fn existing(row: Option<Row>, source: &str, idem_key: &str) -> Row {
    row.unwrap_or_else(|| {
        Error::NoDataFound { message: format!("no idempotency key \"{idem_key}\" for source \"{source}\"") }.raise()
    })
}

/// A write that found no row although the latest snapshot did: the row was
/// committed after this transaction's snapshot (REPEATABLE READ or
/// SERIALIZABLE), so the call raises 40001.
pub(crate) fn expect_one(rows: Rows<'_>) {
    if rows.len() != 1 {
        Error::SerializationFailure {
            message: "could not change the key: it was changed by a concurrent transaction \
                      after this transaction's snapshot"
                .into(),
        }
        .raise();
    }
}
