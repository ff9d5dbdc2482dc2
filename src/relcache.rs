//! Invalidation of what this backend caches about the extension's tables
//! (per-source settings and their verification keys,
//! [`crate::store::cache::SourceCache`]; the layout of the keys table or of
//! its local shards, [`crate::store::direct_writes`]; the source's shard,
//! [`crate::store::local_shard`]; whether the keys table is a Citus table,
//! [`crate::citus`]),
//! following PostgreSQL's own caches: a relation cache invalidation of a
//! watched table (or of every relation, after the shared invalidation
//! queue overflowed) bumps [`generation`], and a cache built
//! under an older generation is dropped before it is used.
//!
//! Invalidations reach a backend when it starts a transaction or takes a
//! lock for the first time in one, and its own changes at its next
//! command, so a cache checked against [`generation`] after the table's
//! lock is taken is as current as the relation cache itself.

use pgrx::pg_sys::{self, Oid};
use std::cell::Cell;

/// How many tables the backend watches (the keys table, the sources and
/// their secrets).
const WATCHED: usize = 3;

thread_local! {
    static GENERATION: Cell<u64> = const { Cell::new(0) };
    /// The oids of the watched tables (0: not known yet, which makes every
    /// invalidation count).
    static OIDS: Cell<[u32; WATCHED]> = const { Cell::new([0; WATCHED]) };
    static REGISTERED: Cell<bool> = const { Cell::new(false) };
    /// Further relations whose invalidation counts: the shards of the keys
    /// table this node holds, once written directly (Citus,
    /// [`super::local_shard`]); 0 where free.
    static SHARDS: Cell<[u32; SHARDS_WATCHED]> = const { Cell::new([0; SHARDS_WATCHED]) };
}

/// How many shards [`watch_shard`] remembers (a node holds 16 of the 32
/// shards of a cluster of two workers; past this many, every invalidation
/// counts).
const SHARDS_WATCHED: usize = 64;

/// A watched table.
#[derive(Debug, Clone, Copy)]
pub enum Table {
    Keys = 0,
    Sources = 1,
    Secrets = 2,
}

/// Relation cache invalidation callback. PostgreSQL calls it while it
/// processes invalidation messages, so it only bumps a counter: no
/// allocation, no error, no panic (hence no `pg_guard`).
unsafe extern "C-unwind" fn invalidated(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    let oids = OIDS.get();
    let shards = SHARDS.get();
    if relid == pg_sys::InvalidOid
        || oids.contains(&0)
        || oids.contains(&relid.to_u32())
        || shards[SHARDS_WATCHED - 1] != 0
        || shards.contains(&relid.to_u32())
    {
        GENERATION.set(GENERATION.get().wrapping_add(1));
    }
}

/// The current generation; registers the callback on first use.
pub fn generation() -> u64 {
    if !REGISTERED.get() {
        // SAFETY: registers a 'static function once per backend; PostgreSQL
        // keeps up to MAX_RELCACHE_CALLBACKS of them.
        unsafe { pg_sys::CacheRegisterRelcacheCallback(Some(invalidated), pg_sys::Datum::from(0)) };
        REGISTERED.set(true);
    }
    GENERATION.get()
}

/// Remember the oid of a watched table (as just read from the catalog).
pub fn watch(table: Table, oid: pg_sys::Oid) {
    let mut oids = OIDS.get();
    oids[table as usize] = oid.to_u32();
    OIDS.set(oids);
}

/// Remember the oid of a shard of the keys table: its own invalidations
/// (DDL on the shard alone) count too. When more than [`SHARDS_WATCHED`]
/// are remembered, every invalidation counts.
pub fn watch_shard(oid: pg_sys::Oid) {
    let mut shards = SHARDS.get();
    let oid = oid.to_u32();
    if shards.contains(&oid) {
        return;
    }
    if let Some(free) = shards.iter_mut().find(|s| **s == 0) {
        *free = oid;
        SHARDS.set(shards);
    }
}

/// Forget the shards [`watch_shard`] remembered (when the distributed
/// table's metadata may have changed: the shards written from now on are
/// remembered again), so that a backend watches the shards it uses, not
/// every shard it ever held.
pub fn forget_shards() {
    SHARDS.set([0; SHARDS_WATCHED]);
}

/// Send a relation cache invalidation for `relid`: every backend drops what
/// it cached about it when the current transaction commits (this one at
/// its next command).
pub fn invalidate(relid: pg_sys::Oid) {
    // SAFETY: queues an invalidation message for a relation oid; valid in
    // any transaction, a no-op for an oid no backend has cached.
    unsafe { pg_sys::CacheInvalidateRelcacheByRelid(relid) };
}

/// [`invalidate`] the tables of per-source settings and keys
/// (`webhook_dedup.sources`, `webhook_dedup.source_secrets`), found by name.
pub fn invalidate_settings_tables() {
    // SAFETY: catalog look-ups by name in a transaction (a trigger runs in
    // one); an unknown name gives InvalidOid, which is skipped.
    unsafe {
        let schema = pg_sys::get_namespace_oid(c"webhook_dedup".as_ptr(), true);
        if schema == pg_sys::InvalidOid {
            return;
        }
        for name in [c"sources", c"source_secrets"] {
            let relid = pg_sys::get_relname_relid(name.as_ptr(), schema);
            if relid != pg_sys::InvalidOid {
                invalidate(relid);
            }
        }
    }
}

/// The oids of schema `webhook_dedup` and of `webhook_dedup.keys`, if they
/// exist; the table is watched from then on. (The one look-up of the keys
/// table by name: the direct writes, the Citus checks and the local shard
/// path all start here.)
pub fn keys_oid() -> Option<(Oid, Oid)> {
    // SAFETY: catalog look-ups by name; both return InvalidOid when missing
    // (missing_ok = true for the schema).
    let (schema, oid) = unsafe {
        let schema = pg_sys::get_namespace_oid(c"webhook_dedup".as_ptr(), true);
        if schema == pg_sys::InvalidOid {
            return None;
        }
        (schema, pg_sys::get_relname_relid(c"keys".as_ptr(), schema))
    };
    (oid != pg_sys::InvalidOid).then(|| {
        watch(Table::Keys, oid);
        (schema, oid)
    })
}
