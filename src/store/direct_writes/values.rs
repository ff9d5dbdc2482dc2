//! A row of the keys table as datums, by column ([`Col`]): what a
//! session reads, what a transition sets, what an update writes.

#[allow(unused_imports)]
use super::*;

/// A row of the keys table as datums, by [`Col`]. By-reference datums
/// point into the locked row's buffer (pinned by the session's slot) or
/// into memory of the call.
#[derive(Debug, Clone, Copy)]
pub struct Values {
    pub(super) values: [Datum; COLUMNS.len()],
    pub(super) nulls: [bool; COLUMNS.len()],
    /// The columns [`Values::set`] wrote, bit `Col as usize`: what the SET
    /// list of the equivalent UPDATE names (`ExecGetUpdatedCols`), for the
    /// index-unchanged hint of an update.
    pub(super) set: u32,
}

impl Values {
    pub(super) fn empty() -> Values {
        Values { values: [Datum::from(0); COLUMNS.len()], nulls: [true; COLUMNS.len()], set: 0 }
    }

    /// Set a column to a value (None: NULL).
    pub fn set(&mut self, col: Col, value: Option<Datum>) {
        self.values[col as usize] = value.unwrap_or(Datum::from(0));
        self.nulls[col as usize] = value.is_none();
        self.set |= 1 << (col as usize);
    }

    pub(super) fn get<T: FromDatum>(&self, col: Col) -> Option<T> {
        let c = col as usize;
        // SAFETY: the datum is of the column's type (COLUMNS, checked
        // against the table), valid while the session's slot holds the row.
        unsafe { T::from_datum(self.values[c], self.nulls[c]) }
    }

    pub(super) fn timestamp(&self, col: Col) -> Option<i64> {
        self.get::<TimestampWithTimeZone>(col).map(pg_sys::TimestampTz::from)
    }

    /// The row as [`KeyRow`], its by-reference values copied: into Rust
    /// values, and `result` into the memory context that was current when
    /// the SPI connection was made (`SPI_datumTransfer`, as
    /// [`crate::spi::Rows::get_jsonb`] does), so that it outlives the
    /// connection (whose own context `SPI_finish` deletes). Call it while
    /// connected to SPI.
    pub fn key_row(&self) -> KeyRow {
        let state: String = self.get(Col::State).expect("state is NOT NULL");
        let result = (!self.nulls[Col::Result as usize]).then(|| {
            // SAFETY: a jsonb datum (see `get`); pg_detoast_datum_packed
            // returns it or a detoasted copy, and SPI_datumTransfer copies
            // that varlena (by reference, typLen -1) into the context the
            // caller of the SPI connection allocates in (it raises when not
            // connected).
            unsafe {
                let detoasted = pg_sys::pg_detoast_datum_packed(self.values[Col::Result as usize].cast_mut_ptr());
                Jsonb::from_raw(pg_sys::SPI_datumTransfer(Datum::from(detoasted), false, -1))
            }
        });
        KeyRow {
            source: self.get(Col::Source).expect("source is NOT NULL"),
            idem_key: self.get(Col::IdemKey).expect("idem_key is NOT NULL"),
            state: State::parse(&state)
                .unwrap_or_else(|| pgrx::error!("webhook_dedup: unknown stored state {state:?}")),
            attempt: self.get(Col::Attempt).expect("attempt is NOT NULL"),
            claim_token: self.get::<Uuid>(Col::ClaimToken),
            lease_expires_at: self.timestamp(Col::LeaseExpiresAt),
            next_attempt_at: self.timestamp(Col::NextAttemptAt),
            fingerprint: self.get(Col::Fingerprint),
            event_type: self.get(Col::EventType),
            result,
            last_step: self.get(Col::LastStep),
            first_seen_at: self.timestamp(Col::FirstSeenAt).expect("first_seen_at is NOT NULL"),
            due_at: self.timestamp(Col::DueAt),
        }
    }

    /// `deliveries`, `conflicts` (NOT NULL integers).
    pub fn count(&self, col: Col) -> i32 {
        self.get(col).unwrap_or(0)
    }

    pub fn is_null(&self, col: Col) -> bool {
        self.nulls[col as usize]
    }

    /// Whether `token` holds the row's lease (as [`KeyRow::held_by`],
    /// without copying the row).
    pub fn held_by(&self, token: &Uuid) -> bool {
        let state: Option<String> = self.get(Col::State);
        let held = self.get::<Uuid>(Col::ClaimToken);
        let state = state.as_deref().and_then(State::parse).unwrap_or(State::Pending);
        crate::claim::holds_lease(state, held.as_ref().map(|t| t.as_bytes().as_slice()), token.as_bytes())
    }

    pub fn event_type(&self) -> Option<String> {
        self.get(Col::EventType)
    }
}

/// The columns [`Session::read_row`] copies of a key's row.
pub(super) const READ: [Col; 14] = [
    Col::Source,
    Col::IdemKey,
    Col::State,
    Col::Attempt,
    Col::ClaimToken,
    Col::LeaseExpiresAt,
    Col::NextAttemptAt,
    Col::Fingerprint,
    Col::EventType,
    Col::Result,
    Col::LastStep,
    Col::FirstSeenAt,
    Col::DueAt,
    Col::LastSeenAt,
];

/// A read row copied ([`Values::key_row`]) with its `last_seen_at`, or
/// None when this transaction wrote it (`ours`). `attr` gives the datums of
/// a row whose buffer is pinned while this runs; call it while connected
/// to SPI.
pub(super) fn copy_unless_ours(attr: &dyn Fn(Col) -> (Datum, bool), ours: bool) -> Option<(KeyRow, i64)> {
    if ours {
        return None;
    }
    let mut v = Values::empty();
    for col in READ {
        let (datum, null) = attr(col);
        v.set(col, (!null).then_some(datum));
    }
    Some((v.key_row(), v.timestamp(Col::LastSeenAt).expect("last_seen_at is NOT NULL")))
}
