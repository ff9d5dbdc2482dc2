//! Whether the extension runs distributed on Citus (`webhook_dedup.distribute()`,
//! docs/distributed.md), and where a distributed table's work belongs.
//!
//! Distributed, the per-source tables are sharded by `source`: a statement
//! that names one source is routed to the one shard that holds it, and may
//! lock rows there (`FOR UPDATE`), while Citus refuses a locking read
//! across shards. The queue and maintenance therefore work source by
//! source when [`keys_distributed`]: they find the sources with work due
//! (a read without locks, which Citus runs on every shard), then run their
//! usual statement restricted to each source. Maintenance does so on every
//! node for the sources whose shards are on that node ([`local_sources`]).

use super::cache;
use crate::spi::{arg, Conn, Snap, Statement};
use pgrx::pg_sys::{self, Datum, Oid, TEXTOID};
use std::cell::Cell;

static LOCAL_SOURCE: Statement =
    Statement::returning(crate::sql_statement!("citus_local_source.sql"), &[TEXTOID], &["local"]);

thread_local! {
    /// (relation cache generation, whether the keys table is a Citus table)
    static DISTRIBUTED: Cell<Option<(u64, bool)>> = const { Cell::new(None) };
}

/// Whether `relid` is a Citus table (distributed or reference: a row in
/// `pg_catalog.pg_dist_partition`, on the coordinator and on every worker
/// with metadata). Its rows live in shards that Citus's planner and
/// executor route to; the local relation is an empty shell, which a write
/// here would fill behind Citus's back.
///
/// # Safety
/// In a transaction (a catalog scan).
pub unsafe fn is_citus_table(relid: Oid) -> bool {
    // SAFETY: catalog look-up by name, then a heap scan of a small catalog
    // (one row per Citus table) opened and closed here.
    unsafe {
        let catalog = pg_sys::get_relname_relid(c"pg_dist_partition".as_ptr(), pg_sys::PG_CATALOG_NAMESPACE.into());
        if catalog == pg_sys::InvalidOid {
            return false;
        }
        let dist = pg_sys::table_open(catalog, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let mut key: pg_sys::ScanKeyData = std::mem::zeroed();
        // attribute 1 of pg_dist_partition is logicalrelid
        pg_sys::ScanKeyInit(
            &mut key,
            1,
            pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
            pg_sys::F_OIDEQ.into(),
            Datum::from(relid),
        );
        let scan = pg_sys::systable_beginscan(dist, pg_sys::InvalidOid, false, std::ptr::null_mut(), 1, &mut key);
        let found = !pg_sys::systable_getnext(scan).is_null();
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(dist, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        found
    }
}

/// Whether `webhook_dedup.keys` is a Citus table (cached per relation cache
/// generation: `distribute()` invalidates the table's cache entry).
pub fn keys_distributed() -> bool {
    let generation = cache::generation();
    if let Some((cached, distributed)) = DISTRIBUTED.get() {
        if cached == generation {
            return distributed;
        }
    }
    // SAFETY: called in a transaction (every caller runs SQL).
    let distributed = super::direct::keys_oid().is_some_and(|(_, oid)| unsafe { is_citus_table(oid) });
    DISTRIBUTED.set(Some((generation, distributed)));
    distributed
}

/// Whether this node is the coordinator of a distributed install (Citus
/// group 0): the node that holds no shard and where the cluster-wide
/// checks of maintenance (the retention check) run once.
pub fn is_coordinator() -> bool {
    pgrx::spi::Spi::get_one::<bool>("SELECT pg_catalog.citus_is_coordinator()")
        .unwrap_or_else(|e| pgrx::error!("webhook_dedup: asking Citus whether this is the coordinator: {e}"))
        .unwrap_or(false)
}

/// The sources (of `rows`, a column `source` first) whose keys are in a
/// shard on this node: each node's maintenance does its own
/// (`citus_local_source.sql`), and the statements it runs for them execute
/// locally.
pub fn local_sources(conn: &Conn<'_>, rows: &crate::spi::Rows<'_>) -> Vec<String> {
    (0..rows.len())
        .filter_map(|i| rows.get::<String>(i, 1))
        .filter(|source| conn.execute(&LOCAL_SOURCE, &[arg(source.as_str())], Snap::Statement).get(0, 1) == Some(true))
        .collect()
}
