//! Kept SPI plans, executed with an explicitly chosen snapshot.
//!
//! pgrx's SPI wrappers pick `read_only` from whether the transaction has an
//! XID yet, which decides which snapshot a statement sees. The claim path
//! needs to decide that itself:
//! - the look-up of a key after its lock is taken runs on the **latest**
//!   snapshot ([`Snap::Latest`]), so it sees a row committed while this
//!   backend waited for the lock, in every isolation level;
//! - writes run on the statement snapshot SPI takes for a non-read-only
//!   statement ([`Snap::Statement`]): a fresh one under READ COMMITTED, the
//!   transaction's under REPEATABLE READ / SERIALIZABLE, so PostgreSQL's
//!   own update-conflict checks apply there.
//!
//! Every statement is prepared once per backend and kept (`SPI_keepplan`);
//! the plan cache re-plans it after DDL. All calls must happen inside an
//! SPI connection (`pgrx::spi::Spi::connect`).

use pgrx::pg_sys;
use pgrx::{FromDatum, IntoDatum};
use std::cell::Cell;
use std::ffi::CStr;
use std::ptr::NonNull;

/// A statement prepared on first use and kept for the backend's life.
pub struct Statement {
    sql: &'static CStr,
    argtypes: &'static [pg_sys::Oid],
    plan: Cell<Option<NonNull<pg_sys::_SPI_plan>>>,
}

// SAFETY: a Postgres backend runs its extension code on one thread; the
// Cell is never touched from another thread (pgrx's thread check enforces
// that SPI is only used from the main thread).
unsafe impl Sync for Statement {}

impl Statement {
    pub const fn new(sql: &'static CStr, argtypes: &'static [pg_sys::Oid]) -> Self {
        Statement {
            sql,
            argtypes,
            plan: Cell::new(None),
        }
    }

    fn plan(&self) -> NonNull<pg_sys::_SPI_plan> {
        if let Some(plan) = self.plan.get() {
            return plan;
        }
        // SAFETY: inside an SPI connection (module contract); the argtypes
        // slice outlives the call; SPI_prepare copies what it needs.
        let plan = unsafe {
            pg_sys::SPI_prepare(
                self.sql.as_ptr(),
                self.argtypes.len() as i32,
                self.argtypes.as_ptr().cast_mut(),
            )
        };
        let Some(plan) = NonNull::new(plan) else {
            // SAFETY: SPI_result is set by the failed SPI_prepare.
            let code = unsafe { pg_sys::SPI_result };
            pgrx::error!(
                "webhook_dedup: SPI_prepare failed ({code}) for: {:?}",
                self.sql
            );
        };
        // SAFETY: the plan was just prepared in this SPI connection; keeping
        // moves it under CacheMemoryContext so it survives SPI_finish.
        unsafe { pg_sys::SPI_keepplan(plan.as_ptr()) };
        self.plan.set(Some(plan));
        plan
    }
}

/// Which snapshot a statement runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Snap {
    /// SPI's own choice for a non-read-only statement.
    Statement,
    /// `GetLatestSnapshot()`: everything committed so far, plus this
    /// transaction's own earlier writes.
    Latest,
}

/// The rows a statement returned (or affected), valid until the SPI
/// connection ends.
pub struct Rows {
    table: *mut pg_sys::SPITupleTable,
    count: usize,
}

impl Rows {
    /// Rows returned by a query, or affected by a write without RETURNING.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Column `column` (1-based) of row `row` (0-based).
    pub fn get<T: FromDatum>(&self, row: usize, column: i32) -> Option<T> {
        assert!(
            row < self.count && !self.table.is_null(),
            "row {row} out of range"
        );
        // SAFETY: the table belongs to the current SPI connection and `row`
        // is in range; SPI_getbinval checks the column number (raising an
        // ERROR on a bad one, never reading out of bounds).
        unsafe {
            let table = &*self.table;
            let tuple = *table.vals.add(row);
            let mut is_null = false;
            let datum = pg_sys::SPI_getbinval(tuple, table.tupdesc, column, &mut is_null);
            let typoid = pg_sys::SPI_gettypeid(table.tupdesc, column);
            T::from_polymorphic_datum(datum, is_null, typoid)
        }
    }
}

/// An argument for a statement parameter.
pub fn arg<T: IntoDatum>(value: T) -> Option<pg_sys::Datum> {
    value.into_datum()
}

/// Execute `statement` with `args` (one per parameter, `None` for NULL).
/// Errors raised by the statement propagate as Postgres ERRORs.
pub fn execute(statement: &Statement, args: &[Option<pg_sys::Datum>], snap: Snap) -> Rows {
    assert_eq!(
        args.len(),
        statement.argtypes.len(),
        "wrong argument count for {:?}",
        statement.sql
    );
    let plan = statement.plan();
    let mut values: Vec<pg_sys::Datum> = args
        .iter()
        .map(|a| a.unwrap_or(pg_sys::Datum::from(0)))
        .collect();
    let nulls: Vec<std::ffi::c_char> = args
        .iter()
        .map(|a| if a.is_some() { b' ' as _ } else { b'n' as _ })
        .collect();
    // SAFETY: inside an SPI connection; `values`/`nulls` have one entry per
    // plan argument and live across the call; a null snapshot pointer means
    // "SPI's choice" (InvalidSnapshot); GetLatestSnapshot returns a valid
    // static snapshot that SPI copies (read_only = false) before use.
    unsafe {
        pg_sys::SPI_tuptable = std::ptr::null_mut();
        let snapshot = match snap {
            Snap::Statement => std::ptr::null_mut(),
            Snap::Latest => pg_sys::GetLatestSnapshot(),
        };
        let status = pg_sys::SPI_execute_snapshot(
            plan.as_ptr(),
            values.as_mut_ptr(),
            nulls.as_ptr(),
            snapshot,
            std::ptr::null_mut(),
            false,
            true,
            0,
        );
        if status < 0 {
            pgrx::error!(
                "webhook_dedup: SPI_execute_snapshot failed ({status}) for: {:?}",
                statement.sql
            );
        }
        Rows {
            table: pg_sys::SPI_tuptable,
            count: pg_sys::SPI_processed as usize,
        }
    }
}

/// Run `body` inside an SPI connection.
pub fn connected<R>(body: impl FnOnce() -> R) -> R {
    pgrx::spi::Spi::connect(|_client| body())
}
