//! `webhook_claim` and `webhook_complete`: the SQL glue of the claim state
//! machine ([`crate::claim`] decides; this file locks, reads and writes).
//!
//! Every call follows one protocol (the argument is in `docs/design.md`):
//! 1. take the key's transaction-scoped advisory lock, so all writers of
//!    one key are serialised across every partition;
//! 2. look the key up on the *latest* snapshot, across the live partitions
//!    (at most one row exists: only lock holders insert, and they insert
//!    only after seeing none);
//! 3. decide in pure Rust, then apply one write to the one row (or insert
//!    into the current partition).
//!
//! Under REPEATABLE READ / SERIALIZABLE the write runs on the transaction
//! snapshot; when the row the latest snapshot found is invisible to it
//! (committed by someone else after the snapshot was taken), the write
//! touches nothing and the call raises 40001 instead of acting on a state
//! the transaction cannot see.

use crate::claim::{self, decide, Outcome, State, Stored, Write};
use crate::error::{required, Error, OrRaise};
use crate::jsonb::Jsonb;
use crate::key::check_bounded;
use crate::metrics::{self, Counter};
use crate::spi::{self, arg, Conn, Rows, Snap, Statement};
use crate::time::{clock_now, duration_us, timestamptz};
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::Uuid;
use sha2::{Digest, Sha256};

/// `objsubid` of this extension's advisory locks in `pg_locks` (`'WD'`);
/// `pg_advisory_lock()` uses 1 and 2, so callers' own advisory locks never
/// collide with ours.
pub const LOCK_CLASS: u16 = 0x5744;

/// Take the advisory lock of (`source`, `idem_key`) until the transaction ends.
pub(crate) fn lock_key(source: &str, idem_key: &str) {
    let id = claim::lock_id(source, idem_key);
    // SAFETY: the tag is fully initialised as SET_LOCKTAG_ADVISORY does in
    // PostgreSQL's lock.h; LockAcquire waits (dontWait = false) and raises
    // on deadlock, so it returns only with the lock held.
    unsafe {
        let tag = pg_sys::LOCKTAG {
            locktag_field1: pg_sys::MyDatabaseId.to_u32(),
            locktag_field2: (id >> 32) as u32,
            locktag_field3: id as u32,
            locktag_field4: LOCK_CLASS,
            locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
            locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
        };
        pg_sys::LockAcquire(
            &tag,
            pg_sys::ExclusiveLock as pg_sys::LOCKMODE,
            false,
            false,
        );
    }
}

/// A random (version 4) UUID from the server's strong random source.
fn new_token() -> Uuid {
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

use pg_sys::{BYTEAOID, INT4OID, JSONBOID, TEXTOID, TIMESTAMPTZOID, UUIDOID};

static LOOKUP: Statement = Statement::new(
    crate::sql_statement!("claim_lookup.sql"),
    &[TEXTOID, TEXTOID],
);

static INSERT: Statement = Statement::new(
    crate::sql_statement!("claim_insert.sql"),
    &[
        TEXTOID,
        TEXTOID,
        TIMESTAMPTZOID,
        UUIDOID,
        TIMESTAMPTZOID,
        BYTEAOID,
        TEXTOID,
    ],
);

static LEASE: Statement = Statement::new(
    crate::sql_statement!("claim_lease.sql"),
    &[
        TEXTOID,
        TEXTOID,
        TIMESTAMPTZOID,
        INT4OID,
        UUIDOID,
        TIMESTAMPTZOID,
        BYTEAOID,
        TEXTOID,
        TIMESTAMPTZOID,
    ],
);

static TOUCH: Statement = Statement::new(
    crate::sql_statement!("claim_touch.sql"),
    &[
        TEXTOID,
        TEXTOID,
        TIMESTAMPTZOID,
        INT4OID,
        BYTEAOID,
        TIMESTAMPTZOID,
    ],
);

static COMPLETE: Statement = Statement::new(
    crate::sql_statement!("claim_complete.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, JSONBOID, TIMESTAMPTZOID],
);

/// A key's row as the look-up returns it.
struct Row {
    stored: Stored,
    partition_at: TimestampWithTimeZone,
    claim_token: Option<Uuid>,
    result: Option<Jsonb>,
    last_step: Option<String>,
    first_seen_at: TimestampWithTimeZone,
    event_type: Option<String>,
}

fn lookup(conn: &Conn<'_>, source: &str, idem_key: &str) -> Option<Row> {
    let rows = conn.execute(&LOOKUP, &[arg(source), arg(idem_key)], Snap::Latest);
    if rows.is_empty() {
        return None;
    }
    if rows.len() > 1 {
        pgrx::error!(
            "webhook_dedup: key ({source}, {idem_key}) is stored {} times",
            rows.len()
        );
    }
    let state_text: String = rows.get(0, 1).expect("state is NOT NULL");
    let state = State::parse(&state_text)
        .unwrap_or_else(|| pgrx::error!("webhook_dedup: unknown stored state {state_text:?}"));
    let ts = |rows: &Rows, col| {
        rows.get::<TimestampWithTimeZone>(0, col)
            .map(pg_sys::TimestampTz::from)
    };
    Some(Row {
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
    })
}

/// A write that found no row although the latest snapshot did: the row
/// was committed after this transaction's snapshot.
fn expect_one(rows: Rows<'_>) {
    if rows.len() != 1 {
        Error::SerializationFailure {
            message: "could not claim the key: it was changed by a concurrent transaction \
                      after this transaction's snapshot"
                .into(),
        }
        .raise();
    }
}

/// One output row of `webhook_claim` (the column names are in its signature).
type ClaimRow = (
    String,
    Option<Uuid>,
    i32,
    String,
    Option<Jsonb>,
    Option<String>,
    TimestampWithTimeZone,
    Option<TimestampWithTimeZone>,
);

/// Claim one delivery of a key: returns exactly one row saying whether the
/// caller must process it (`claimed`, `reclaimed`: then `claim_token` is set
/// and the lease runs until `lease_expires_at`) or not (`in_progress`,
/// `duplicate` with the stored `result`, `conflict`, `retry_later`,
/// `unknown_outcome`, `dead_lettered`).
///
/// - `source`, `idem_key`: 1 to 255 characters (NULL 22004, empty or
///   longer 22023).
/// - `payload`: when given, its SHA-256 is the key's fingerprint; a later
///   delivery with another payload is a `conflict`.
/// - `lease`: positive interval of at most 365 days, without months
///   (22023 otherwise); NULL means `webhook_dedup.default_lease`.
/// - `event_type`: stored with the key and used to label metrics.
///
/// Runs in the caller's transaction: a rollback frees the claim. Times are
/// the database clock (`clock_timestamp()`) after the key's lock is taken.
#[pg_extern(volatile, parallel_unsafe)]
#[allow(clippy::type_complexity)] // pgrx needs the column names inline
fn webhook_claim(
    source: Option<&str>,
    idem_key: Option<&str>,
    payload: default!(Option<&[u8]>, "NULL"),
    lease: default!(Option<Interval>, "NULL"),
    event_type: default!(Option<&str>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(outcome, String),
        name!(claim_token, Option<Uuid>),
        name!(attempt, i32),
        name!(state, String),
        name!(result, Option<Jsonb>),
        name!(last_step, Option<String>),
        name!(first_seen_at, TimestampWithTimeZone),
        name!(lease_expires_at, Option<TimestampWithTimeZone>),
    ),
> {
    let source = required(source, "source");
    let idem_key = required(idem_key, "idem_key");
    check_bounded("source", source).or_raise();
    check_bounded("idem_key", idem_key).or_raise();
    let lease_us = match lease {
        Some(lease) => duration_us(lease, "lease")
            .and_then(claim::check_lease_us)
            .or_raise(),
        None => crate::guc::default_lease_us(),
    };
    let fingerprint: Option<Vec<u8>> = payload.map(|p| Sha256::digest(p).to_vec());

    lock_key(source, idem_key);
    let now = clock_now();
    let (row, outcome, label) = spi::connected(|conn| {
        let found = lookup(conn, source, idem_key);
        let decision = decide(
            found.as_ref().map(|r| &r.stored),
            now,
            fingerprint.as_deref(),
        );
        let label = found
            .as_ref()
            .and_then(|r| r.event_type.clone())
            .or(event_type.map(str::to_string));
        let now_ts = timestamptz(now);
        let lease_until = timestamptz(now.saturating_add(lease_us));
        let row: ClaimRow = match (decision.write, found) {
            (Write::Insert, _) => {
                let token = new_token();
                conn.execute(
                    &INSERT,
                    &[
                        arg(source),
                        arg(idem_key),
                        arg(now_ts),
                        arg(token),
                        arg(lease_until),
                        arg(fingerprint.as_deref()),
                        arg(event_type),
                    ],
                    Snap::Statement,
                );
                let state = State::Processing.as_str().to_string();
                (
                    decision.outcome.as_str().into(),
                    Some(token),
                    1,
                    state,
                    None,
                    None,
                    now_ts,
                    Some(lease_until),
                )
            }
            (Write::Lease { attempt }, Some(found)) => {
                let token = new_token();
                expect_one(conn.execute(
                    &LEASE,
                    &[
                        arg(source),
                        arg(idem_key),
                        arg(now_ts),
                        arg(attempt),
                        arg(token),
                        arg(lease_until),
                        arg(fingerprint.as_deref()),
                        arg(event_type),
                        arg(found.partition_at),
                    ],
                    Snap::Statement,
                ));
                let state = State::Processing.as_str().to_string();
                let out = decision.outcome.as_str().to_string();
                (
                    out,
                    Some(token),
                    attempt,
                    state,
                    found.result,
                    found.last_step,
                    found.first_seen_at,
                    Some(lease_until),
                )
            }
            (Write::Touch, Some(found)) => {
                let conflict = i32::from(decision.outcome == Outcome::Conflict);
                expect_one(conn.execute(
                    &TOUCH,
                    &[
                        arg(source),
                        arg(idem_key),
                        arg(now_ts),
                        arg(conflict),
                        arg(fingerprint.as_deref()),
                        arg(found.partition_at),
                    ],
                    Snap::Statement,
                ));
                // A conflicting delivery never sees what the other payload's
                // holder stored.
                let (result, last_step) = if conflict == 1 {
                    (None, None)
                } else {
                    (found.result, found.last_step)
                };
                let lease_at = found.stored.lease_expires_at.map(timestamptz);
                (
                    decision.outcome.as_str().into(),
                    None,
                    found.stored.attempt,
                    found.stored.state.as_str().into(),
                    result,
                    last_step,
                    found.first_seen_at,
                    lease_at,
                )
            }
            (write, None) => unreachable!("decision {write:?} needs a stored row"),
        };
        (row, decision.outcome, label)
    });
    metrics::count(
        source,
        label.as_deref(),
        Counter::for_outcome(outcome),
        true,
    );
    TableIterator::once(row)
}

/// Complete a claimed key: stores `result` (returned to later duplicates)
/// and marks the key `completed`. Returns true when `claim_token` held the
/// key's lease; false, changing nothing, when the token is stale (the
/// lease was reclaimed by another delivery, or the key is no longer
/// `processing`). An unknown key is P0002. Fencing is by token, not by
/// clock: a holder whose lease expired but was not reclaimed still
/// completes.
#[pg_extern(volatile, parallel_unsafe)]
fn webhook_complete(
    source: Option<&str>,
    idem_key: Option<&str>,
    claim_token: Option<Uuid>,
    result: default!(Option<Jsonb>, "NULL"),
) -> bool {
    let source = required(source, "source");
    let idem_key = required(idem_key, "idem_key");
    let token = required(claim_token, "claim_token");
    check_bounded("source", source).or_raise();
    check_bounded("idem_key", idem_key).or_raise();

    lock_key(source, idem_key);
    let now = clock_now();
    let (done, label) = spi::connected(|conn| {
        let Some(found) = lookup(conn, source, idem_key) else {
            Error::NoDataFound {
                message: format!("no idempotency key \"{idem_key}\" for source \"{source}\""),
            }
            .raise();
        };
        let held = found.claim_token.as_ref().map(|t| t.as_bytes().as_slice());
        if !claim::may_complete(found.stored.state, held, token.as_bytes()) {
            return (false, found.event_type);
        }
        expect_one(conn.execute(
            &COMPLETE,
            &[
                arg(source),
                arg(idem_key),
                arg(timestamptz(now)),
                arg(result),
                arg(found.partition_at),
            ],
            Snap::Statement,
        ));
        (true, found.event_type)
    });
    let counter = if done {
        Counter::Completions
    } else {
        Counter::StaleCompletions
    };
    metrics::count(source, label.as_deref(), counter, false);
    done
}
