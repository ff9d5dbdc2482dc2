//! The writes of a claim: the upsert every delivery starts with, the lease
//! a reclaim grants, and the record of a conflicting payload.

use super::{Key, Upserted, UPSERTED};
use crate::spi::{arg, Conn, Snap, Statement};
use crate::time::timestamptz;
use pgrx::pg_sys::{BYTEAOID, INT4OID, TEXTOID, TIMESTAMPTZOID, UUIDOID};
use pgrx::Uuid;

static UPSERT: Statement = Statement::returning(
    crate::sql_statement!("claim_upsert.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, UUIDOID, TIMESTAMPTZOID, BYTEAOID, TEXTOID],
    UPSERTED,
);

static LEASE: Statement = Statement::new(
    crate::sql_statement!("key_lease.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, INT4OID, UUIDOID, TIMESTAMPTZOID, TEXTOID],
);

static CONFLICT: Statement = Statement::new(
    crate::sql_statement!("key_conflict.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, BYTEAOID, BYTEAOID, TEXTOID],
);

/// A delivery to claim: stored as a new key leased to `token` until
/// `lease_until` if the key is unknown.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    pub key: Key<'a>,
    /// The database clock at the call (microseconds).
    pub now: i64,
    pub token: Uuid,
    pub lease_until: i64,
    /// SHA-256 of the payload, when the caller gave one.
    pub fingerprint: Option<&'a [u8]>,
    pub event_type: Option<&'a str>,
}

/// Store the delivery's key as new (leased to the caller, attempt 1), or
/// lock the known key and count the delivery on it (`deliveries`,
/// `last_seen_at`; a key without a fingerprint adopts the delivery's).
/// One statement (`claim_upsert.sql`).
pub fn upsert(conn: &Conn<'_>, d: &Delivery<'_>) -> Upserted {
    let rows = conn.execute(
        &UPSERT,
        &[
            arg(d.key.source),
            arg(d.key.idem_key),
            arg(timestamptz(d.now)),
            arg(d.token),
            arg(timestamptz(d.lease_until)),
            arg(d.fingerprint),
            arg(d.event_type),
        ],
        Snap::Statement,
    );
    Upserted::read(&rows)
}

/// A lease granted on a key this transaction holds locked.
#[derive(Debug, Clone, Copy)]
pub struct Lease<'a> {
    pub now: i64,
    /// The attempt the lease is for (the stored one plus one).
    pub attempt: i32,
    pub token: Uuid,
    pub until: i64,
    /// Adopted as the key's event type when it has none.
    pub event_type: Option<&'a str>,
}

/// Lease the key (state `processing`, a new token and attempt, due when
/// the lease ends). The caller holds the key's row lock.
pub fn lease(conn: &Conn<'_>, key: Key<'_>, l: &Lease<'_>) {
    let rows = conn.execute(
        &LEASE,
        &[
            arg(key.source),
            arg(key.idem_key),
            arg(timestamptz(l.now)),
            arg(l.attempt),
            arg(l.token),
            arg(timestamptz(l.until)),
            arg(l.event_type),
        ],
        Snap::Statement,
    );
    super::transitions::expect_one(rows.len());
}

/// Which call saw a conflicting payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Claim,
    Enqueue,
}

impl Via {
    fn as_str(self) -> &'static str {
        match self {
            Via::Claim => "claim",
            Via::Enqueue => "enqueue",
        }
    }
}

/// Count a delivery whose payload differs from the key's fingerprint on
/// the (locked) key, and record it in `webhook_dedup.conflict_log`.
pub fn record_conflict(conn: &Conn<'_>, key: Key<'_>, now: i64, stored: &[u8], given: &[u8], via: Via) {
    conn.execute(
        &CONFLICT,
        &[arg(key.source), arg(key.idem_key), arg(timestamptz(now)), arg(stored), arg(given), arg(via.as_str())],
        Snap::Statement,
    );
}
