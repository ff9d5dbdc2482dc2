//! The claim metrics' glue: the counter table
//! ([`webhook_dedup_core::metrics`], where every rule of what is counted
//! where lives, with the list of what can be lost or misplaced and the
//! shares that keep a flood of made-up sources from pushing real ones out)
//! in shared memory under one LWLock, and its flush into
//! `webhook_dedup.claim_counts` (the upsert is the store's,
//! [`crate::store::claim_counts`]).
//!
//! Counting happens in shared memory under one LWLock held for a short,
//! bounded time, as contrib's pg_stat_statements does, because a
//! per-delivery row write would cost a claim far more (an extra insert in
//! the claim transaction cost about 30% of throughput when measured here)
//! and a counter row updated by every claim would serialise the claims of a
//! source behind one row lock until commit (and, taken together with a
//! key's lock, could deadlock).
//!
//! [`flush`] moves the current database's counters into
//! `webhook_dedup.claim_counts` (called by `webhook_dedup.run_maintenance()`);
//! `webhook_dedup.duplicate_metrics` adds the flushed rows and the live ones.
//! Without `shared_preload_libraries` there is no shared memory and nothing
//! is counted (the view shows what was flushed before, if anything).
//! Counting a source that is not configured, once its database's unchecked
//! share is used up, needs the role that may call the counting functions
//! (`webhook_dedup_receiver` or `webhook_dedup_operator`): the glue looks the
//! source up in `webhook_dedup.sources`, outside the lock.
//!
//! Locking rule: the LWLock is held only to probe the open-addressing table
//! or to copy fixed-size entries into a buffer allocated beforehand; no
//! allocation, SPI or ereport happens under it.
//!
//! The table takes 4.6 MiB (2,048 entries of 2,344 bytes), so it is zeroed
//! in place in shared memory and never built or copied on a stack.

use crate::spi;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::CStr;
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, Ordering};
use webhook_dedup_core::metrics::{event, event_counts, with_room, AskKnown, Known, Row, Table};
pub use webhook_dedup_core::metrics::{Counter, OVERFLOW_SOURCE};

/// The table's name in the shared memory index, and its LWLock tranche's.
const SHMEM_NAME: &CStr = c"webhook_dedup_metrics";

/// The shared table and its lock in this process: set by the postmaster's
/// shared memory startup hook, inherited by the backends it forks (and set
/// again by each backend's own call of the hook where backends are not
/// forked). Null without `shared_preload_libraries`.
static TABLE: AtomicPtr<Table> = AtomicPtr::new(ptr::null_mut());
static LOCK: AtomicPtr<pg_sys::LWLock> = AtomicPtr::new(ptr::null_mut());

/// Ask for the table's space and its lock (from [`crate::shmem`]'s
/// request hook, while the postmaster sizes shared memory).
///
/// Not with pgrx's `PgLwLock`: its `pg_shmem_init!` builds the value on
/// the postmaster's stack and moves it into shared memory, several copies
/// of 4.6 MiB in an unoptimised build. Here the table is zeroed in place.
pub(crate) fn request() {
    // SAFETY: called while the postmaster sizes shared memory.
    unsafe {
        pg_sys::RequestAddinShmemSpace(size_of::<Table>());
        pg_sys::RequestNamedLWLockTranche(SHMEM_NAME.as_ptr(), 1);
    }
}

/// Find (or make) the table in shared memory: from [`crate::shmem`]'s
/// startup hook, under `AddinShmemInitLock`.
///
/// # Safety
/// Called with `AddinShmemInitLock` held, after [`request`] asked for the
/// space.
pub(crate) unsafe fn attach() {
    // SAFETY: ShmemInitStruct under AddinShmemInitLock (the caller's). The
    // space was requested with this size; it is MAXALIGNed (8 bytes, the
    // table's alignment). All-zero bytes are a valid empty table (booleans
    // false, integers 0), so zeroing in place initialises it without
    // building one anywhere else.
    unsafe {
        let mut found = false;
        let table = pg_sys::ShmemInitStruct(SHMEM_NAME.as_ptr(), size_of::<Table>(), &mut found).cast::<Table>();
        assert!(table.is_aligned(), "shared memory is not aligned");
        if !found {
            table.write_bytes(0, 1);
        }
        let lock = &raw mut (*pg_sys::GetNamedLWLockTranche(SHMEM_NAME.as_ptr())).lock;
        LOCK.store(lock, Ordering::Release);
        TABLE.store(table, Ordering::Release);
    }
}

/// Whether the shared table exists (the library was preloaded).
pub fn shared() -> bool {
    !TABLE.load(Ordering::Acquire).is_null()
}

/// The shared table under its LWLock, held until the guard is dropped
/// (PostgreSQL also releases it if an error aborts the transaction);
/// `EXCLUSIVE` false: shared, read only.
struct Locked<const EXCLUSIVE: bool> {
    table: NonNull<Table>,
    lock: *mut pg_sys::LWLock,
}

impl<const EXCLUSIVE: bool> Locked<EXCLUSIVE> {
    /// Panics without the shared table (check [`shared`] first).
    fn acquire() -> Self {
        let table = NonNull::new(TABLE.load(Ordering::Acquire)).expect("the metrics table is in shared memory");
        let lock = LOCK.load(Ordering::Acquire);
        let mode = if EXCLUSIVE { pg_sys::LWLockMode::LW_EXCLUSIVE } else { pg_sys::LWLockMode::LW_SHARED };
        // SAFETY: the lock set next to the table by on_shmem_startup.
        unsafe { pg_sys::LWLockAcquire(lock, mode) };
        Locked { table, lock }
    }
}

impl<const EXCLUSIVE: bool> Deref for Locked<EXCLUSIVE> {
    type Target = Table;
    fn deref(&self) -> &Table {
        // SAFETY: the table lives as long as shared memory, and the lock is
        // held (shared at least) while the guard lives.
        unsafe { self.table.as_ref() }
    }
}

impl DerefMut for Locked<true> {
    fn deref_mut(&mut self) -> &mut Table {
        // SAFETY: as in deref, and the lock is held exclusively.
        unsafe { self.table.as_mut() }
    }
}

impl<const EXCLUSIVE: bool> Drop for Locked<EXCLUSIVE> {
    fn drop(&mut self) {
        // SAFETY: acquired in acquire(), released once.
        unsafe { pg_sys::LWLockRelease(self.lock) };
    }
}

fn database() -> u32 {
    // SAFETY: a backend-global set at connection; read-only here.
    unsafe { pg_sys::MyDatabaseId.to_u32() }
}

/// Count one event: `Deliveries` (when `delivery`) plus `counter`, for
/// `source` and `event_type` in the current hour of this database, and for
/// `source` in the current minute. Does nothing when the library was not
/// preloaded.
pub fn count(source: &str, event_type: Option<&str>, counter: Counter, delivery: bool) {
    if !shared() {
        return;
    }
    let deferred = DEFERRED.with_borrow_mut(|d| {
        d.as_mut().map(|list| {
            list.push(Held { source: source.into(), event_type: event_type.map(Into::into), counter, delivery })
        })
    });
    if deferred.is_none() {
        record(source, event_type, counter, delivery);
    }
}

/// A count [`deferring`] holds back: the arguments of [`count`].
struct Held {
    source: String,
    event_type: Option<String>,
    counter: Counter,
    delivery: bool,
}

thread_local! {
    /// The counts [`deferring`] holds back (`None`: none is running).
    static DEFERRED: std::cell::RefCell<Option<Vec<Held>>> = const { std::cell::RefCell::new(None) };
}

/// Run `body` with the counts it makes held back, then record them only
/// when it returns `Some` (a subtransaction that is rolled back,
/// `webhook_receive`'s bound, undoes its claim, which must then not stay
/// counted: the delivery is counted as what it was answered). Dropped when
/// `body` returns `None` or raises.
pub fn deferring<R>(body: impl FnOnce() -> Option<R>) -> Option<R> {
    struct Restore(Option<Vec<Held>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            DEFERRED.with_borrow_mut(|d| *d = outer);
        }
    }
    let restore = Restore(DEFERRED.with_borrow_mut(|d| d.replace(Vec::new())));
    let result = body();
    let held = DEFERRED.with_borrow_mut(|d| d.take()).unwrap_or_default();
    drop(restore);
    if result.is_some() {
        for h in held {
            count(&h.source, h.event_type.as_deref(), h.counter, h.delivery);
        }
    }
    result
}

fn record(source: &str, event_type: Option<&str>, counter: Counter, delivery: bool) {
    let counts = event_counts(counter, delivery);
    let event = event(database(), crate::time::clock_now(), source, event_type.unwrap_or(""));
    let mut known = Known::Unchecked;
    while Locked::<true>::acquire().record(&event, &counts, known) == Err(AskKnown) {
        // only when the database's unchecked share is used up: not under
        // the lock (SPI), and cached per backend (store::sources)
        let configured = spi::connected(|conn| crate::store::sources::settings(conn, source).configured);
        known = if configured { Known::Yes } else { Known::No };
    }
}

/// The live (not yet flushed) counters of this database.
pub fn live_rows() -> Vec<Row> {
    if !shared() {
        return Vec::new();
    }
    let mut buffer = Vec::new();
    with_room(&mut buffer, Locked::<false>::acquire, |table, out| table.copy(database(), out));
    buffer.iter().map(Row::from_entry).collect()
}

/// Move this database's live counters into `webhook_dedup.claim_counts`.
/// Returns the number of entries written. If this transaction aborts after
/// the move, the moved counts are lost (at most one flush interval's worth).
pub fn flush() -> i64 {
    if !shared() {
        return 0;
    }
    let mut buffer = Vec::new();
    let (database, now) = (database(), crate::time::clock_now());
    let (dropped, minutes_dropped) = with_room(&mut buffer, Locked::<true>::acquire, |mut table, out| {
        table.take(database, now, out);
        table.take_dropped()
    });
    if dropped > 0 {
        pgrx::warning!(
            "webhook_dedup: {dropped} claim counts were dropped because the shared metrics table was full; \
             flush more often (run webhook_dedup.run_maintenance())"
        );
    }
    if minutes_dropped > 0 {
        pgrx::warning!(
            "webhook_dedup: {minutes_dropped} per-minute counts were not kept because the shared metrics table \
             was too full (the hourly counts were); duplicate_metrics_by_minute and duplicate_rate_alerts with \
             windows up to an hour miss them: flush more often, in every database with the extension"
        );
    }
    let rows: Vec<Row> = buffer.iter().map(Row::from_entry).collect();
    spi::connected(|conn| rows.iter().for_each(|row| crate::store::claim_counts::add(conn, row)));
    rows.len() as i64
}

/// SQL functions in schema `webhook_dedup`.
#[pg_schema]
mod webhook_dedup {
    use super::{flush, live_rows};
    use pgrx::datum::TimestampWithTimeZone;
    use pgrx::prelude::*;

    /// The live counters as rows (used by the `duplicate_metrics` view).
    #[pg_extern(volatile, parallel_restricted)]
    #[allow(clippy::type_complexity)]
    fn metrics_live() -> TableIterator<
        'static,
        (
            name!(bucket, TimestampWithTimeZone),
            name!(minute, bool),
            name!(source, String),
            name!(event_type, String),
            name!(counts, Vec<i64>),
        ),
    > {
        TableIterator::new(
            live_rows()
                .into_iter()
                .map(|r| (crate::time::timestamptz(r.bucket), r.minute, r.source, r.event_type, r.counts)),
        )
    }

    /// Flush the live counters now; returns how many entries were written.
    #[pg_extern(volatile, parallel_unsafe)]
    fn flush_metrics() -> i64 {
        flush()
    }
}
