//! Per-source settings (`webhook_dedup.sources`), cached in each backend so
//! that a claim, a completion or a `webhook_receive` reads no table for
//! them.
//!
//! The cache follows PostgreSQL's own: it is emptied by a relation cache
//! invalidation of `webhook_dedup.sources`, which the statement trigger
//! `sources_changed` sends on every INSERT, UPDATE, DELETE and TRUNCATE
//! (`CacheInvalidateRelcacheByRelid`). Other backends receive it when the
//! change commits and process it at their next transaction start (or lock
//! acquisition); the changing transaction itself at its next command. So a
//! call sees every change committed before its transaction began, as a
//! query of the table would under READ COMMITTED. The cache holds at most
//! [`CAPACITY`] sources (sources without a row included) and starts over
//! when full.

use crate::error::OrRaise;
use crate::spi::{arg, Conn, Snap, Statement};
use pgrx::datum::Interval;
use pgrx::pg_sys::{self, TEXTOID};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

static SETTINGS: Statement = Statement::returning(
    crate::sql_statement!("source_settings.sql"),
    &[TEXTOID],
    &["lease", "max_attempts", "retention", "tolerance", "sources"],
);

/// How many sources one backend keeps.
pub const CAPACITY: usize = 1_024;

/// A source's own settings; `None` falls back to the `webhook_dedup.*`
/// setting of the same name.
#[derive(Debug, Clone, Copy, Default)]
pub struct SourceSettings {
    pub lease: Option<Interval>,
    pub max_attempts: Option<i32>,
    pub retention: Option<Interval>,
    pub tolerance: Option<Interval>,
}

impl SourceSettings {
    /// The lease a claim gets when it passes none, in microseconds.
    /// Converted only when used, so that a bad row fails only the calls
    /// that need it (22023).
    pub fn default_lease_us(&self) -> i64 {
        match self.lease {
            Some(lease) => crate::time::duration_us(lease, "webhook_dedup.sources.lease").or_raise(),
            None => crate::guc::default_lease_us(),
        }
    }

    /// Attempts after which a failing key is dead-lettered.
    pub fn max_attempts(&self) -> i32 {
        self.max_attempts.unwrap_or_else(crate::guc::max_attempts)
    }

    /// How long a completed key is kept after its last activity, in
    /// microseconds.
    pub fn retention_us(&self) -> i64 {
        match self.retention {
            Some(r) => crate::time::duration_us(r, "webhook_dedup.sources.retention").or_raise(),
            None => crate::guc::retention_us(),
        }
    }
}

thread_local! {
    static CACHE: RefCell<HashMap<String, SourceSettings>> = RefCell::new(HashMap::new());
    /// Bumped by every invalidation of `webhook_dedup.sources` (or of every
    /// relation); the cache is emptied when it no longer matches.
    static GENERATION: Cell<u64> = const { Cell::new(0) };
    static CACHED_GENERATION: Cell<u64> = const { Cell::new(0) };
    /// The oid of `webhook_dedup.sources`, as last read (0: not yet).
    static SOURCES_OID: Cell<u32> = const { Cell::new(0) };
    static REGISTERED: Cell<bool> = const { Cell::new(false) };
}

/// Relation cache invalidation callback: called by PostgreSQL while it
/// processes invalidation messages, so it only bumps a counter (no
/// allocation, no error, no panic, no borrow of the cache; hence no
/// `pg_guard` either).
unsafe extern "C-unwind" fn invalidated(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    let ours = SOURCES_OID.get();
    if relid == pg_sys::InvalidOid || ours == 0 || relid.to_u32() == ours {
        GENERATION.set(GENERATION.get().wrapping_add(1));
    }
}

fn register() {
    if !REGISTERED.get() {
        // SAFETY: registers a callback with a 'static function pointer;
        // PostgreSQL keeps at most MAX_RELCACHE_CALLBACKS per backend and
        // this registers one, once.
        unsafe { pg_sys::CacheRegisterRelcacheCallback(Some(invalidated), pg_sys::Datum::from(0)) };
        REGISTERED.set(true);
    }
}

/// The settings of `source` (cached; read with `conn` on a miss).
pub fn settings(conn: &Conn<'_>, source: &str) -> SourceSettings {
    register();
    let generation = GENERATION.get();
    if CACHED_GENERATION.get() != generation {
        CACHE.with_borrow_mut(HashMap::clear);
        CACHED_GENERATION.set(generation);
    }
    if let Some(found) = CACHE.with_borrow(|c| c.get(source).copied()) {
        return found;
    }
    let rows = conn.execute(&SETTINGS, &[arg(source)], Snap::Statement);
    let found = SourceSettings {
        lease: rows.get(0, 1),
        max_attempts: rows.get(0, 2),
        retention: rows.get(0, 3),
        tolerance: rows.get(0, 4),
    };
    let oid: Option<pg_sys::Oid> = rows.get(0, 5);
    SOURCES_OID.set(oid.map_or(0, |o| o.to_u32()));
    // Keep it only if no invalidation arrived while it was read (the read
    // may have seen the table before or after that change).
    if GENERATION.get() == generation {
        CACHE.with_borrow_mut(|c| {
            if c.len() >= CAPACITY {
                c.clear();
            }
            c.insert(source.to_owned(), found);
        });
    }
    found
}

/// Send a relation cache invalidation for `relid` (the trigger
/// `sources_changed` on `webhook_dedup.sources`): every backend's cache of
/// source settings is emptied when the change commits.
pub fn invalidate(relid: pg_sys::Oid) {
    // SAFETY: queues an invalidation message for a relation oid; valid in
    // any transaction, a no-op for an oid no backend has cached.
    unsafe { pg_sys::CacheInvalidateRelcacheByRelid(relid) };
}
