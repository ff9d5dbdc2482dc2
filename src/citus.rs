//! Whether the extension runs distributed on Citus, as a fact of this
//! backend: whether `webhook_dedup.keys` is a Citus table
//! (`webhook_dedup.distribute()`, docs/distributed.md), which Citus is
//! loaded, and whether kept plans must be planned afresh on it. Read from
//! the catalogs and settings alone (no SPI), so the kept-plan executor
//! (`crate::spi`) and the store above it can both ask; where a distributed
//! table's work belongs (the sources on this node, the coordinator) is the
//! store's (`crate::store::citus`).

use pgrx::pg_sys::{self, Datum, Oid};
use std::cell::Cell;

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
    let generation = crate::relcache::generation();
    if let Some((cached, distributed)) = DISTRIBUTED.get() {
        if cached == generation {
            return distributed;
        }
    }
    // SAFETY: called in a transaction (every caller runs SQL).
    let distributed = crate::relcache::keys_oid().is_some_and(|(_, oid)| unsafe { is_citus_table(oid) });
    DISTRIBUTED.set(Some((generation, distributed)));
    distributed
}

/// A Citus release, `major.minor.patch`.
pub type Version = (u32, u32, u32);

/// Parse `citus.version` (`13.2.2`, possibly with a suffix such as
/// `13.2.2 (commit ...)` or `13.6devel`): the leading numbers, `None` when
/// it does not start with `major.minor`.
pub fn parse_version(text: &str) -> Option<Version> {
    let mut numbers = text
        .split(|c: char| !c.is_ascii_digit())
        .take_while(|part| !part.is_empty())
        .map(|part| part.parse::<u32>().ok());
    let major = numbers.next()??;
    let minor = numbers.next()??;
    let patch = numbers.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// Whether executing a kept (generic) plan of a statement on a Citus table
/// grows the backend on this Citus: since 13.2.1, Citus's
/// `GetCachedLocalPlan` (src/backend/distributed/planner/local_plan_cache.c)
/// misses whenever the persistent plan's task list is not exactly one task,
/// which a fast-path statement or a parameterised INSERT (pruning deferred
/// to execution) never has, so every execution re-plans the shard query
/// and appends the result to a list in the cached plan's memory context
/// that is never freed (about 85 KB per claim, measured;
/// citusdata/citus#8783, fixed by #8824 in 13.5.0). Only the 13.x releases
/// from 13.5.0 on are known to be fixed; every other version, and one that
/// does not parse, is treated as affected.
pub fn keeps_local_plans(version: Option<Version>) -> bool {
    !matches!(version, Some((13, minor, _)) if minor >= 5)
}

/// Whether the local-shard fast path (src/store/local_shard.rs) may call
/// into this Citus: the releases whose four functions it calls
/// (`LockShardDistributionMetadata`, `GetCurrentLocalExecutionStatus`,
/// `SetLocalExecutionStatus`, `Use2PCForCoordinatedTransaction`), the
/// `LocalExecutionStatus` values it passes, and the locking and local
/// execution rules it follows (distributed_execution_locks.c,
/// local_executor.c, shard_transfer.c, metadata_cache.c) were read in the
/// source and run: 13.x (13.2.2) and 14.0.x (14.0.1, whose files of those
/// functions differ from 13.2.2's in formatting only). Any other release,
/// and one that does not parse, takes the SQL path until it is verified.
pub fn fast_path_verified(version: Option<Version>) -> bool {
    matches!(version, Some((13, _, _)) | Some((14, 0, _)))
}

thread_local! {
    /// The loaded Citus's release (Citus is loaded at most once per
    /// backend, so it never changes): None until read, then
    /// `Some(parsed citus.version)`.
    static LOADED: Cell<Option<Option<Version>>> = const { Cell::new(None) };
}

/// The release of the Citus loaded in this backend (its `citus.version`
/// setting), None when Citus is not loaded or the setting does not parse.
pub fn loaded_version() -> Option<Version> {
    if let Some(version) = LOADED.get() {
        return version;
    }
    // SAFETY: GetConfigOption with missing_ok returns NULL for an unknown
    // setting, else a string owned by the GUC machinery, copied at once.
    let text = unsafe {
        let value = pg_sys::GetConfigOption(c"citus.version".as_ptr(), true, false);
        (!value.is_null()).then(|| std::ffi::CStr::from_ptr(value).to_string_lossy().into_owned())
    };
    let version = text.as_deref().and_then(parse_version);
    LOADED.set(Some(version));
    version
}

/// Whether the loaded Citus is one whose generic plans grow the backend
/// ([`keeps_local_plans`]).
fn generic_plans_grow() -> bool {
    keeps_local_plans(loaded_version())
}

/// Whether this backend's kept statements must be planned afresh on every
/// execution (custom plans, `CURSOR_OPT_CUSTOM_PLAN`): the extension's
/// tables are Citus tables, on a Citus whose generic plans grow the backend
/// with every execution ([`keeps_local_plans`]). A custom plan is planned
/// for its execution and freed after it, so nothing accumulates; on the
/// affected releases a generic plan re-plans the shard query every time
/// anyway, so a custom plan costs about the same (docs/distributed.md).
pub fn plans_must_be_custom() -> bool {
    keys_distributed() && generic_plans_grow()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_fixed_releases_keep_generic_plans() {
        assert_eq!(parse_version("13.2.2"), Some((13, 2, 2)));
        assert_eq!(parse_version("13.6devel"), Some((13, 6, 0)));
        assert_eq!(parse_version("12.1.10 (abc)"), Some((12, 1, 10)));
        assert_eq!(parse_version("devel"), None);
        assert_eq!(parse_version("13"), None);
        for (version, grows) in [
            ("13.2.1", true),
            ("13.2.2", true),
            ("13.4.9", true),
            ("13.5.0", false),
            ("13.6devel", false),
            ("12.1.5", true),
            ("14.0.0", true),
            ("nonsense", true),
        ] {
            assert_eq!(keeps_local_plans(parse_version(version)), grows, "{version}");
        }
    }

    #[test]
    fn the_fast_path_calls_only_the_releases_read() {
        for (version, verified) in [
            ("13.2.2", true),
            ("13.5.0", true),
            ("14.0.0", true),
            ("14.0.1", true),
            ("14.1.0", false),
            ("12.1.10", false),
            ("15.0devel", false),
            ("nonsense", false),
        ] {
            assert_eq!(fast_path_verified(parse_version(version)), verified, "{version}");
        }
    }
}
