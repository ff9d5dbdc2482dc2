//! The writes of a claim, each in its two forms (the direct write of
//! [`super::direct_writes`] where the table allows, else the SQL statement): the
//! insert or count every delivery starts with ([`claim`]), the lease a
//! reclaim grants and the dead letter of an exhausted key ([`Held`]), and
//! the record of a conflicting payload.

use super::direct_writes::{Col, Insert, Locked, Looked, Session, Values};
use super::{Key, KeyRow, Upserted, UPSERTED};
use crate::claim::State;
use crate::spi::{arg, Conn, Snap, Statement};
use crate::time::timestamptz;
use pgrx::pg_sys::{self, BYTEAOID, INT4OID, TEXTOID, TIMESTAMPTZOID, UUIDOID};
use pgrx::prelude::*;
use pgrx::{IntoDatum, Uuid};

static UPSERT: Statement = Statement::returning(
    crate::sql_statement!("claim_upsert.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, UUIDOID, TIMESTAMPTZOID, BYTEAOID, TEXTOID],
    UPSERTED,
);

static LEASE: Statement = Statement::new(
    crate::sql_statement!("claim_lease.sql"),
    &[TEXTOID, TEXTOID, TIMESTAMPTZOID, INT4OID, UUIDOID, TIMESTAMPTZOID, TEXTOID],
);

static CONFLICT: Statement = Statement::new(
    crate::sql_statement!("claim_conflict.sql"),
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

/// What [`claim`] found of a delivery's key. (One per claim, on the
/// stack: no box.)
#[allow(clippy::large_enum_variant)]
pub enum Claimed {
    /// The key was new: stored, leased to the delivery's token (attempt 1).
    Inserted,
    /// Known, and `yield_if` said to leave it: nothing locked or written.
    Yielded,
    /// Known, and `answer_read` said the row as read answers the delivery:
    /// nothing locked or written.
    Read(KeyRow),
    /// Known, locked by this transaction and the delivery counted on it
    /// (`deliveries`, `last_seen_at`; a key without a fingerprint adopts
    /// the delivery's), as the row now reads; what the claim writes
    /// besides goes through the [`Held`].
    Locked(KeyRow, Held),
}

/// A known key a claim holds locked, and where its writes go. (One per
/// claim, on the stack: no box.)
#[allow(clippy::large_enum_variant)]
pub enum Held {
    /// The upsert statement locked the key and counted the delivery; each
    /// further transition is one more statement.
    Sql,
    /// The session holds the key's row lock; the row's values, the
    /// delivery counted, are written once by [`Held::finish`], with
    /// whatever the transitions add.
    Direct { session: Session, tid: pg_sys::ItemPointerData, values: Values },
}

impl Held {
    /// Lease the key to `l.token` (state `processing`, attempt
    /// `l.attempt`, due when the lease ends; the key adopts `l.event_type`
    /// when it has none): `claim_lease.sql`, or its direct form.
    pub fn lease(&mut self, conn: &Conn<'_>, key: Key<'_>, l: &Lease<'_>) {
        match self {
            Held::Sql => lease(conn, key, l),
            Held::Direct { values, .. } => {
                let until = timestamptz(l.until);
                values.set(Col::State, State::Processing.as_str().into_datum());
                values.set(Col::Attempt, l.attempt.into_datum());
                values.set(Col::ClaimToken, l.token.into_datum());
                values.set(Col::LeaseExpiresAt, until.into_datum());
                values.set(Col::DueAt, until.into_datum());
                values.set(Col::LeasedAt, timestamptz(l.now).into_datum());
                values.set(Col::NextAttemptAt, None);
                if values.is_null(Col::EventType) {
                    values.set(Col::EventType, l.event_type.into_datum());
                }
            }
        }
    }

    /// Dead-letter `found`, a key out of attempts
    /// ([`crate::claim::exhausted_error`]): `transitions_fail.sql`, or its direct
    /// form.
    pub fn dead_letter_exhausted(&mut self, conn: &Conn<'_>, found: &KeyRow, now: i64) {
        match self {
            Held::Sql => super::transitions::dead_letter_exhausted(conn, found, now),
            Held::Direct { values, .. } => {
                let error = crate::claim::exhausted_error(found.attempt);
                values.set(Col::State, State::DeadLettered.as_str().into_datum());
                values.set(Col::NextAttemptAt, None);
                values.set(Col::DueAt, None);
                values.set(Col::LeaseExpiresAt, None);
                values.set(Col::LastError, error.as_str().into_datum());
            }
        }
    }

    /// Write what the transitions set (the direct form's one update) and
    /// release the session; nothing for the SQL form, whose statements
    /// wrote already.
    pub fn finish(self) {
        if let Held::Direct { mut session, tid, values } = self {
            session.update(tid, &values);
            session.close();
        }
    }
}

/// Whether [`claim`] leaves a known key alone, from the key as the latest
/// snapshot shows it.
pub type YieldIf<'f> = &'f mut dyn FnMut(&Looked) -> bool;

/// Whether [`claim`] answers a known key from its row as read, given the
/// row and its `last_seen_at` (microseconds since 2000).
pub type AnswerRead<'f> = &'f mut dyn FnMut(&KeyRow, i64) -> bool;

/// Claim `d`'s key: store it as new, leased to `d.token`, or find it known,
/// lock it and count the delivery on it ([`Claimed`]). A known key is
/// first offered to `yield_if` (the key as the latest snapshot shows it,
/// before its row is locked: true leaves it alone, [`Claimed::Yielded`])
/// and then, with `answer_read`, to be answered from the version the
/// latest snapshot sees, committed by another transaction (the probe that
/// found the key waited for its writers), with its `last_seen_at`: true
/// answers it so ([`Claimed::Read`]). Both are asked only where the claim
/// runs without SQL ([`super::direct_writes`]); the upsert statement
/// (`claim_upsert.sql`) locks and counts at once.
pub fn claim(
    conn: &Conn<'_>,
    d: &Delivery<'_>,
    yield_if: Option<YieldIf<'_>>,
    answer_read: Option<AnswerRead<'_>>,
) -> Claimed {
    let Some(mut session) = Session::open(conn, d.key.source) else {
        return match upsert(conn, d) {
            Upserted::Inserted => Claimed::Inserted,
            Upserted::Known(found) => Claimed::Locked(*found, Held::Sql),
        };
    };
    // claim_upsert.sql is INSERT ... ON CONFLICT DO UPDATE, which the
    // executor refuses at its start on a table published for updates
    // without a replica identity, even for a key that turns out new
    session.check_updatable();
    let (mut yield_if, mut answer_read) = (yield_if, answer_read);
    loop {
        let tid = match session.insert_claim(d) {
            Insert::Inserted => {
                session.close();
                return Claimed::Inserted;
            }
            Insert::Known(tid) => tid,
        };
        if let Some(yield_if) = yield_if.as_deref_mut() {
            if session.look(d.key).is_some_and(|looked| yield_if(&looked)) {
                session.close();
                return Claimed::Yielded;
            }
        }
        if let Some(answer_read) = answer_read.as_deref_mut() {
            if let Some((found, last_seen_at)) = session.read_row_at(d.key, tid) {
                if answer_read(&found, last_seen_at) {
                    session.close();
                    return Claimed::Read(found);
                }
            }
        }
        match session.lock(d.key, tid) {
            // deleted since the probe (webhook_forget, retention): new again
            Locked::Gone => continue,
            Locked::Row(mut values, tid) => {
                count_delivery(&mut values, d);
                return Claimed::Locked(values.key_row(), Held::Direct { session, tid, values });
            }
        }
    }
}

/// The count every delivery of a known key makes, as `claim_upsert.sql`'s
/// `DO UPDATE`: one more delivery, seen now, and the delivery's
/// fingerprint adopted by a key without one.
fn count_delivery(values: &mut Values, d: &Delivery<'_>) {
    let Some(deliveries) = values.count(Col::Deliveries).checked_add(1) else {
        // what the statement's int4 addition raises
        pgrx::ereport!(ERROR, PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range");
    };
    values.set(Col::Deliveries, deliveries.into_datum());
    values.set(Col::LastSeenAt, timestamptz(d.now).into_datum());
    if values.is_null(Col::Fingerprint) {
        values.set(Col::Fingerprint, d.fingerprint.into_datum());
    }
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
