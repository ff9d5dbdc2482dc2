//! The per-backend cache of per-source rows (settings, [`super::sources`];
//! verification keys, [`super::secrets`]): one type, so that both follow
//! PostgreSQL's own caches the same way. Each cache watches one table
//! ([`crate::relcache::Table`]); an entry built under an older
//! [`crate::relcache::generation`] is dropped before it is used, and a row
//! read while an invalidation arrived is returned but not kept (the read
//! may have seen the table before or after that change).
//!
//! A cache holds at most [`CAPACITY`] sources (sources without a row
//! included) and starts over when full: a receiver serves a bounded set of
//! sources, and starting over costs one read per source.

use crate::relcache::{self, Table};
use pgrx::pg_sys::Oid;
use std::cell::RefCell;
use std::collections::HashMap;

/// How many sources one cache of one backend keeps.
pub const CAPACITY: usize = 1_024;

/// What a backend cached of one table, per source; `T` is cheap to clone
/// (an `Rc` or a small struct of them).
pub struct SourceCache<T> {
    table: Table,
    /// (the generation the entries were read under, the entries)
    entries: RefCell<(u64, HashMap<String, T>)>,
}

impl<T: Clone> SourceCache<T> {
    /// An empty cache of `table`'s rows (in a `thread_local!`).
    pub fn new(table: Table) -> Self {
        Self { table, entries: RefCell::new((0, HashMap::new())) }
    }

    /// The cached value of `source`, else `read()`'s, which returns it and
    /// the oid of the table it was read from (`None` when the read cannot
    /// tell: no row). `read` runs SQL: it must read with the latest
    /// snapshot, not the statement's, since under REPEATABLE READ the
    /// transaction snapshot can predate an invalidation already processed,
    /// and what it reads would stay cached. Nothing is borrowed while it
    /// runs, so it may itself use a cache.
    pub fn get(&self, source: &str, read: impl FnOnce() -> (T, Option<Oid>)) -> T {
        let generation = relcache::generation();
        let cached = {
            let mut entries = self.entries.borrow_mut();
            if entries.0 != generation {
                entries.1.clear();
                entries.0 = generation;
            }
            entries.1.get(source).cloned()
        };
        if let Some(found) = cached {
            return found;
        }
        let (found, oid) = read();
        if let Some(oid) = oid {
            relcache::watch(self.table, oid);
        }
        // Keep it only if no invalidation arrived while it was read.
        if relcache::generation() == generation {
            let mut entries = self.entries.borrow_mut();
            if entries.1.len() >= CAPACITY {
                entries.1.clear();
            }
            entries.1.insert(source.to_owned(), found.clone());
        }
        found
    }
}
