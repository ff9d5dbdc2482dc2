//! The local-shard fast path on Citus (docs/distributed.md, "The
//! local-shard fast path").
//!
//! Distributed, a source's keys are in one shard of `webhook_dedup.keys`
//! (`keys_102027`), a plain table on the node that holds its placement. A
//! single-source call that runs on that node (a call the coordinator
//! delegated there, or a client connected to it) would still send each
//! statement through Citus's distributed planner and a nested local
//! executor, which plan the shard query again on every execution (on
//! 13.2.1 to 13.4.x without keeping the plan, src/store/citus.rs). This
//! module lets [`super::direct_writes::Session`] write the shard itself instead,
//! under the locks Citus's executor takes for a single-shard write, and
//! declines (the caller runs its SQL, which Citus routes) whenever the
//! write could differ from what that SQL would do.
//!
//! A write is made here only when every one of these holds, checked in
//! this order on every call:
//!
//! 1. Citus 13.x or 14.0.x is loaded (`citus.version`,
//!    [`crate::citus::fast_path_verified`]; the four Citus functions below
//!    are exported by `citus.so` with these signatures in 13.2.2 and
//!    14.0.1, src/include/distributed/resource_lock.h, local_executor.h and
//!    transaction_management.h, and the rules cited below read the same in
//!    both); on another release the fast path declines until it is
//!    verified there. It declines too when `citus.so` does not export
//!    them: PostgreSQL 16's PGXS compiles modules with
//!    `-fvisibility=hidden`, so no Citus built for 16 or later does
//!    (docs/distributed.md, "Citus versions").
//! 2. The call runs outside a transaction block (`IsTransactionBlock`): a
//!    delegated call arrives so (function_call_delegation.c makes it a
//!    read task outside the coordinator's transaction blocks), as does an
//!    autocommitted call of a client. In a block, earlier statements may
//!    have reached this shard through a connection of Citus's, whose
//!    writes a local write would not see.
//! 3. `citus.enable_local_execution` is on (Citus's own rule for running a
//!    shard query in the session that issues it, local_executor.c
//!    `ShouldExecuteTasksLocally`), and Citus has not disabled local
//!    execution for this transaction (`GetCurrentLocalExecutionStatus`:
//!    the transaction already reached a local placement through a
//!    connection).
//! 4. The distributed table is locked `RowExclusiveLock` (as the SQL
//!    statement's parse analysis locks it), which also takes in the
//!    invalidations sent meanwhile.
//! 5. The source's shard is known ([`route`]: read with the latest
//!    snapshot, as Citus reads its metadata, and only when no invalidation
//!    arrived during the read; cached per backend, dropped
//!    with every relation cache invalidation of the distributed table, which
//!    Citus sends when a shard or a placement of it changes,
//!    metadata_cache.c `CitusInvalidateRelcacheByShardId`): the table is
//!    hash-distributed and not replicated, and the shard's one placement is
//!    on this node (`local_shard_route.sql`).
//! 6. The shard's distribution metadata is locked `ShareLock` through
//!    Citus's own `LockShardDistributionMetadata`, as its executor does
//!    before a shard write (distributed_execution_locks.c
//!    `AcquireMetadataLocks`; a single-shard write on an unreplicated table
//!    takes no other executor lock, `AcquireExecutorShardLocksForExecution`).
//!    A shard move or split takes it `ExclusiveLock` before it copies the
//!    last writes and changes the placement (shard_transfer.c
//!    `BlockWritesToShardList`), so a write under it is either before the
//!    move's copy or waits for the move to commit.
//! 7. After that lock, the invalidations a committed move or split sent are
//!    taken in, and when any arrived the shard is looked up and locked
//!    again (a split elsewhere in the co-location group changes the shard
//!    index the lock's tag is made of): the write is made only when the
//!    placement is still this node's and nothing changed since its lock
//!    was granted (Citus's executor loads the placement from its metadata
//!    cache after the lock, and reroutes a fast-path write whose shard a
//!    split replaced, citus_custom_scan.c).
//! 8. The shard relation still exists when opened.
//!
//! After a write, the transaction's local execution status is
//! `LOCAL_EXECUTION_REQUIRED` and it uses two-phase commit for any remote
//! write (as after Citus's own local execution of a write,
//! local_executor.c): a later statement of the call that reaches this
//! node's placements runs in this session and sees the write, and one that
//! writes through a connection commits atomically with it.
//!
//! The look of the bounded wait reads the shard ([`readable`]) under
//! conditions 1 to 5 and 8, without the metadata lock, which Citus takes
//! for writes only: held while the call sleeps, it would make a shard move
//! wait and every write to the shard's group queue behind the move.

use crate::spi::{arg, Conn, Snap, Statement};
use pgrx::pg_sys::{self, Oid, TEXTOID};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

static ROUTE: Statement = Statement::returning(
    crate::sql_statement!("local_shard_route.sql"),
    &[TEXTOID],
    &["shard_id", "shard", "replay_guards"],
);

/// A source's shard as [`ROUTE`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Route {
    shard_id: i64,
    /// The shard's relation when a write may be made here (see `ROUTE`).
    local: Option<Oid>,
    /// The relation of the source's co-located shard of
    /// `webhook_dedup.replay_guards`, when `local`.
    replay_guards: Option<Oid>,
}

/// The source's shards on this node, their locks taken ([`lock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Local {
    /// The shard of `webhook_dedup.keys`.
    pub keys: Oid,
    /// The co-located shard of `webhook_dedup.replay_guards` (None when
    /// that table is not co-located with the keys).
    pub replay_guards: Option<Oid>,
}

/// How many sources' routes a backend keeps (a receiver serves a handful;
/// a backend that sees more starts over, which costs one look-up each).
const ROUTES_KEPT: usize = 1024;

thread_local! {
    /// (relation cache generation, routes by source)
    static ROUTES: RefCell<(u64, HashMap<String, Route>)> = RefCell::new((0, HashMap::new()));
    /// Citus's functions, found once per backend (None: not found).
    static CITUS: Cell<Option<Result<Citus, &'static str>>> = const { Cell::new(None) };
}

/// `LOCKMODE` of `ShareLock`, `RowExclusiveLock`.
const SHARE_LOCK: pg_sys::LOCKMODE = pg_sys::ShareLock as pg_sys::LOCKMODE;
const ROW_EXCLUSIVE_LOCK: pg_sys::LOCKMODE = pg_sys::RowExclusiveLock as pg_sys::LOCKMODE;

/// Citus's `LocalExecutionStatus` (src/include/distributed/local_executor.h).
const LOCAL_EXECUTION_REQUIRED: i32 = 0;
const LOCAL_EXECUTION_DISABLED: i32 = 2;

/// `void LockShardDistributionMetadata(int64 shardId, LOCKMODE lockMode)`
type LockShardMetadata = unsafe extern "C-unwind" fn(i64, pg_sys::LOCKMODE);
/// `LocalExecutionStatus GetCurrentLocalExecutionStatus(void)`
type GetLocalExecutionStatus = unsafe extern "C-unwind" fn() -> i32;
/// `void SetLocalExecutionStatus(LocalExecutionStatus newStatus)`
type SetLocalExecutionStatus = unsafe extern "C-unwind" fn(i32);
/// `void Use2PCForCoordinatedTransaction(void)`
type Use2Pc = unsafe extern "C-unwind" fn();

/// The functions of Citus this module calls, from the loaded `citus.so`.
#[derive(Clone, Copy)]
struct Citus {
    lock_shard_metadata: LockShardMetadata,
    local_execution_status: GetLocalExecutionStatus,
    set_local_execution_status: SetLocalExecutionStatus,
    use_2pc: Use2Pc,
}

/// Why the fast path cannot call into the loaded Citus (condition 1).
const NOT_VERIFIED: &str = "not a Citus release the fast path was verified on (13.x, 14.0.x)";
/// PostgreSQL 16's PGXS compiles every module with `-fvisibility=hidden`
/// (Makefile.global, `CFLAGS_SL_MODULE`), so a Citus built for 16 or later
/// exports only its SQL-callable functions and `_PG_init`: the four below
/// are in no dynamic symbol table (`nm -D citus.so`).
const NOT_EXPORTED: &str = "this build of Citus does not export LockShardDistributionMetadata, \
     GetCurrentLocalExecutionStatus, SetLocalExecutionStatus and Use2PCForCoordinatedTransaction \
     (a Citus built for PostgreSQL 16 or later: its PGXS compiles modules with -fvisibility=hidden)";

/// Citus's functions, when the loaded Citus is a release they were
/// verified on and this build exports them (condition 1); else why not.
fn citus() -> Result<Citus, &'static str> {
    if let Some(found) = CITUS.get() {
        return found;
    }
    let found = if !crate::citus::fast_path_verified(crate::citus::loaded_version()) {
        Err(NOT_VERIFIED)
    } else {
        // SAFETY: load_external_function finds a symbol of an already
        // loaded library (citus is in shared_preload_libraries, or the
        // keys table could not be a Citus table); with signalNotFound
        // false it returns NULL for a missing one. The signatures are
        // those of Citus 13.2.2 and 14.0.1 (module documentation).
        unsafe {
            let symbol = |name: &std::ffi::CStr| {
                let f = pg_sys::load_external_function(c"citus".as_ptr(), name.as_ptr(), false, std::ptr::null_mut());
                (!f.is_null()).then_some(f)
            };
            (|| {
                Some(Citus {
                    lock_shard_metadata: std::mem::transmute::<*mut std::ffi::c_void, LockShardMetadata>(symbol(
                        c"LockShardDistributionMetadata",
                    )?),
                    local_execution_status: std::mem::transmute::<*mut std::ffi::c_void, GetLocalExecutionStatus>(
                        symbol(c"GetCurrentLocalExecutionStatus")?,
                    ),
                    set_local_execution_status: std::mem::transmute::<*mut std::ffi::c_void, SetLocalExecutionStatus>(
                        symbol(c"SetLocalExecutionStatus")?,
                    ),
                    use_2pc: std::mem::transmute::<*mut std::ffi::c_void, Use2Pc>(symbol(
                        c"Use2PCForCoordinatedTransaction",
                    )?),
                })
            })()
            .ok_or(NOT_EXPORTED)
        }
    };
    CITUS.set(Some(found));
    found
}

/// Whether a Citus setting that is a boolean is on (missing: `default`).
fn citus_setting_on(name: &std::ffi::CStr, default: bool) -> bool {
    // SAFETY: GetConfigOption with missing_ok returns NULL for an unknown
    // setting, else a string owned by the GUC machinery, read at once.
    unsafe {
        let value = pg_sys::GetConfigOption(name.as_ptr(), true, false);
        if value.is_null() {
            return default;
        }
        std::ffi::CStr::from_ptr(value).to_bytes() == b"on"
    }
}

/// The route of `source`, from the cache when no invalidation of the
/// distributed table arrived since it was found (condition 5); None when
/// the metadata kept changing while it was read.
///
/// Read with the latest snapshot, as Citus reads its metadata (a catalog
/// snapshot): under REPEATABLE READ the statement's snapshot predates a
/// move that committed while the call waited for the shard's lock, and
/// would still show the old placement as this node's (its shard is only
/// dropped later), so a write would land in a copy about to be dropped.
fn route(conn: &Conn<'_>, source: &str) -> Option<Route> {
    for _ in 0..3 {
        let generation = crate::relcache::generation();
        let cached = ROUTES.with_borrow_mut(|(at, routes)| {
            if *at != generation {
                *at = generation;
                routes.clear();
                // the shards to watch are those written from now on
                crate::relcache::forget_shards();
                crate::spi::forget_relations();
            }
            routes.get(source).copied()
        });
        if let Some(route) = cached {
            return Some(route);
        }
        let rows = conn.execute(&ROUTE, &[arg(source)], Snap::Latest);
        let route = Route {
            shard_id: rows.get::<i64>(0, 1).expect("get_shard_id_for_distribution_column returns a shard"),
            local: rows.get::<Oid>(0, 2),
            replay_guards: rows.get::<Oid>(0, 3),
        };
        // The look-up itself may have taken in invalidations (its catalog
        // reads lock their catalogs): a route found while the metadata
        // changed may name a shard Citus no longer knows (a split), whose
        // lock would raise. Only one found under a steady generation is
        // used, and kept.
        if crate::relcache::generation() == generation {
            ROUTES.with_borrow_mut(|(at, routes)| {
                if *at == generation {
                    if routes.len() >= ROUTES_KEPT {
                        routes.clear();
                    }
                    routes.insert(source.to_string(), route);
                }
            });
            return Some(route);
        }
    }
    None
}

/// Say at DEBUG2 what the fast path decided for `source` (a session that
/// sets `client_min_messages = debug2` sees it; the tests read it). The
/// message is only made when DEBUG2 is logged or sent somewhere.
pub(crate) fn trace(source: &str, what: impl FnOnce() -> String) {
    // SAFETY: a plain check of the backend's log levels (PostgreSQL 13 has
    // no message_level_is_interesting: the two settings it compares).
    #[cfg(not(feature = "pg13"))]
    let interesting = unsafe { pg_sys::message_level_is_interesting(pg_sys::DEBUG2 as i32) };
    #[cfg(feature = "pg13")]
    let interesting = unsafe {
        pg_sys::log_min_messages <= pg_sys::DEBUG2 as i32 || pg_sys::client_min_messages <= pg_sys::DEBUG2 as i32
    };
    if interesting {
        pgrx::debug2!("webhook_dedup: source \"{source}\": {}", what());
    }
}

/// The shard relations of `source`'s rows to write directly, their locks
/// taken (module documentation), or None: write through SQL. `keys` is the
/// distributed table. (Called again in one call, it finds the route
/// cached and the locks held.)
pub fn lock(conn: &Conn<'_>, keys: Oid, source: &str) -> Option<Local> {
    let shard = locked_shard(conn, keys, source);
    trace(source, || match shard {
        Some(shard) => format!("the local shard (relation {}) is written directly", shard.keys.to_u32()),
        None => "written through SQL (the local-shard fast path declined)".to_string(),
    });
    shard
}

/// Conditions 1 to 3 (module documentation): Citus's functions, when the
/// call may run on a local shard at all.
fn may_run_locally(source: &str) -> Option<Citus> {
    let citus = match citus() {
        Ok(citus) => citus,
        Err(why) => {
            trace(source, || why.into());
            return None;
        }
    };
    // (webhook_receive's bound runs the call in a subtransaction of its
    // own, which is no transaction block of the caller's)
    if crate::subxact::in_transaction_block() {
        trace(source, || "in a transaction block".into());
        return None;
    }
    if !citus_setting_on(c"citus.enable_local_execution", true) {
        trace(source, || "citus.enable_local_execution is off".into());
        return None;
    }
    // SAFETY: Citus's exported function (signature above), through pgrx's
    // error boundary.
    if unsafe { pg_sys::ffi::pg_guard_ffi_boundary(|| (citus.local_execution_status)()) } == LOCAL_EXECUTION_DISABLED {
        trace(source, || "Citus disabled local execution in this transaction".into());
        return None;
    }
    Some(citus)
}

/// Whether `shard` can be opened (it was not dropped meanwhile); locks it
/// in `mode` for the transaction (the caller opens it again: no catalog
/// work then).
fn still_there(source: &str, shard_id: i64, shard: Oid, mode: pg_sys::LOCKMODE) -> bool {
    // SAFETY: try_relation_open returns NULL for a relation that is gone
    // instead of raising (every supported PostgreSQL has it).
    unsafe {
        let rel = pg_sys::try_relation_open(shard, mode);
        if rel.is_null() {
            trace(source, || format!("shard {shard_id} was dropped"));
            return false;
        }
        pg_sys::relation_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
    }
    crate::relcache::watch_shard(shard);
    true
}

fn locked_shard(conn: &Conn<'_>, keys: Oid, source: &str) -> Option<Local> {
    let citus = may_run_locally(source)?;
    // SAFETY: lock a relation by oid in the current transaction (the lock
    // manager takes in pending invalidations when the lock is new; an
    // explicit call covers a lock this transaction already held).
    unsafe {
        pg_sys::LockRelationOid(keys, ROW_EXCLUSIVE_LOCK);
        pg_sys::AcceptInvalidationMessages();
    }
    // (shard id, relation cache generation once its lock was granted)
    let mut locked: Option<(i64, u64)> = None;
    // A move or split may change the shard between the look-up and its
    // lock: follow it a few times, then leave it to SQL.
    for _ in 0..4 {
        let Some(Route { shard_id, local, replay_guards }) = route(conn, source) else {
            trace(source, || "the shard metadata kept changing while it was read".into());
            return None;
        };
        let Some(shard) = local else {
            trace(source, || format!("shard {shard_id} has no placement here that may be written directly"));
            return None;
        };
        if locked != Some((shard_id, crate::relcache::generation())) {
            // The shard's lock, taken (again when an invalidation arrived
            // since: a split elsewhere in the co-location group changes the
            // shard index the lock's tag is made of,
            // SetLocktagForShardDistributionMetadata).
            // SAFETY: Citus's exported function (signature above), through
            // pgrx's error boundary; the shard is one Citus knew under the
            // current generation (route).
            unsafe { pg_sys::ffi::pg_guard_ffi_boundary(|| (citus.lock_shard_metadata)(shard_id, SHARE_LOCK)) };
            // SAFETY: takes in what a move or split that committed while
            // we waited for the lock sent (before it released the lock).
            unsafe { pg_sys::AcceptInvalidationMessages() };
            locked = Some((shard_id, crate::relcache::generation()));
            continue;
        }
        // The shard relation exists while its metadata lock is held (a move
        // drops the old shard only after its placement changed, which the
        // route would have shown).
        if !still_there(source, shard_id, shard, ROW_EXCLUSIVE_LOCK) {
            return None;
        }
        // SAFETY: Citus's exported functions, through pgrx's error
        // boundary. As after Citus's own local execution of a write
        // (local_executor.c): later statements of the transaction that
        // reach this node's placements run in this session, and a
        // transaction that also writes through a remote connection commits
        // with two-phase commit. A transition Citus allows from OPTIONAL or
        // REQUIRED (DISABLED was declined above).
        unsafe {
            pg_sys::ffi::pg_guard_ffi_boundary(|| (citus.set_local_execution_status)(LOCAL_EXECUTION_REQUIRED));
            pg_sys::ffi::pg_guard_ffi_boundary(|| (citus.use_2pc)());
        }
        if let Some(guards) = replay_guards {
            crate::relcache::watch_shard(guards);
        }
        return Some(Local { keys: shard, replay_guards });
    }
    trace(source, || "its shard kept changing while it was locked".into());
    None
}

/// The shard relation of `source`'s keys to read (the look of the bounded
/// wait, [`crate::store::look`]), or None: read through SQL. Conditions 1
/// to 5 and 8 (module documentation), but not the shard's metadata lock:
/// Citus takes that for writes only (`AcquireMetadataLocks`, from
/// `CitusBeginModifyScan`), and a look that held it while its call sleeps
/// would make a shard move wait, and every write to the shard's group
/// queue behind the move, the holder's completion the wait waits for
/// among them. A look at a copy a move just left is harmless: the claim
/// that follows takes the lock and decides; and a recent duplicate
/// answered from such a copy without a write read a state the
/// key had during the call (the move freezes the copy at its cut-over,
/// and writes to the key wait for the move), as any read may.
pub fn readable(conn: &Conn<'_>, keys: Oid, source: &str) -> Option<Oid> {
    may_run_locally(source)?;
    // SAFETY: as in locked_shard, for a read.
    unsafe {
        pg_sys::LockRelationOid(keys, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        pg_sys::AcceptInvalidationMessages();
    }
    let route = route(conn, source)?;
    let shard = route.local?;
    still_there(source, route.shard_id, shard, pg_sys::AccessShareLock as pg_sys::LOCKMODE).then_some(shard)
}

/// The relation of `source`'s shard of `webhook_dedup.replay_guards` on
/// this node, to run the replay guard's insert on (a statement on the
/// shard, [`crate::spi::Statement::on_relation`]), its metadata lock
/// taken with the keys' ([`lock`]: one lock covers co-located shards); None
/// when the fast path declines or `webhook_dedup.direct_writes` is off.
pub fn replay_guards(conn: &Conn<'_>, source: &str) -> Option<Oid> {
    if !crate::guc::direct_writes() || !crate::citus::keys_distributed() {
        return None;
    }
    let (_, keys) = crate::relcache::keys_oid()?;
    lock(conn, keys, source)?.replay_guards
}
