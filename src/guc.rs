//! Every `webhook_dedup.*` setting: private statics, typed accessors, one
//! [`init`]. Contexts are chosen deliberately (see `docs/operations.md`):
//! `PGC_POSTMASTER` for what the worker reads once (its database),
//! `PGC_SIGHUP` for what maintenance re-reads (interval, retention, batch
//! size), `PGC_USERSET` for per-session defaults of a call.

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::ffi::CString;
use webhook_dedup_core::settings;

/// The database the background worker connects to (it runs maintenance
/// there only). Read once, at server start.
static DATABASE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"postgres"));

/// Seconds between two maintenance passes of the worker; 0 stops the
/// worker's passes (run `webhook_dedup.run_maintenance()` yourself then).
static MAINTENANCE_INTERVAL_S: GucSetting<i32> = GucSetting::<i32>::new(60);

/// [`settings::RETENTION`]: how long a completed key is kept after its
/// last activity, seconds.
static RETENTION_S: GucSetting<i32> = GucSetting::<i32>::new(settings::RETENTION.default);

/// [`settings::BATCH_SIZE`]: rows one maintenance step handles per pass.
static BATCH_SIZE: GucSetting<i32> = GucSetting::<i32>::new(settings::BATCH_SIZE.default);

/// The share of its time, in percent, the worker may spend in passes while
/// it catches up with a backlog (passes that report `more`): after such a
/// pass it rests `pass time * (100 - duty) / duty` before the next, so that
/// deleting a day of expired keys never takes a core away from claims.
static MAINTENANCE_DUTY_CYCLE: GucSetting<i32> = GucSetting::<i32>::new(20);

/// [`settings::DEFAULT_LEASE`]: the lease `webhook_claim` gives when the
/// call passes none, seconds.
static DEFAULT_LEASE_S: GucSetting<i32> = GucSetting::<i32>::new(settings::DEFAULT_LEASE.default);

/// [`settings::MAX_ATTEMPTS`]: attempts after which `webhook_fail`
/// dead-letters a key.
static MAX_ATTEMPTS: GucSetting<i32> = GucSetting::<i32>::new(settings::MAX_ATTEMPTS.default);

/// [`settings::DUPLICATE_RECORD_INTERVAL`]: seconds after a key's last
/// recorded activity during which a duplicate is answered with a read
/// alone (no write, no transaction id, no WAL).
static DUPLICATE_RECORD_INTERVAL_S: GucSetting<i32> =
    GucSetting::<i32>::new(settings::DUPLICATE_RECORD_INTERVAL.default);

/// Whether claims store new keys and change known ones with the executor's
/// routines directly ([`crate::store::direct_writes`]) instead of through SQL
/// statements. Both give the same results; off is for comparison and as an
/// escape hatch.
static DIRECT_WRITES: GucSetting<bool> = GucSetting::<bool>::new(true);

/// Define the settings. `preloading`: the library is being loaded from
/// `shared_preload_libraries`. Only then may a PGC_POSTMASTER setting be
/// defined (PostgreSQL raises FATAL "cannot create PGC_POSTMASTER variables
/// after startup" otherwise, as contrib's pg_stat_statements avoids by the
/// same test), so `webhook_dedup.database`, which only the worker reads, is
/// left out when a session loads the library by itself.
pub fn init(preloading: bool) {
    if preloading {
        GucRegistry::define_string_guc(
            c"webhook_dedup.database",
            c"Database in which the background worker runs maintenance.",
            c"The worker connects to this database at server start and runs \
              webhook_dedup.run_maintenance() there; it waits quietly while the \
              extension is not installed in it.",
            &DATABASE,
            GucContext::Postmaster,
            GucFlags::default(),
        );
    }
    GucRegistry::define_int_guc(
        c"webhook_dedup.maintenance_interval",
        c"Time between two maintenance passes of the background worker.",
        c"0 stops the worker's passes (call webhook_dedup.run_maintenance() yourself). \
          Re-read on reload.",
        &MAINTENANCE_INTERVAL_S,
        0,
        86_400,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"webhook_dedup.retention",
        c"How long completed keys and other history are kept after their last activity.",
        c"Must be at least the provider's retry horizon, or a late retry is processed \
          again (webhook_dedup.retention_warnings lists such sources); \
          webhook_dedup.sources.retention overrides it per source.",
        &RETENTION_S,
        settings::RETENTION.min,
        settings::RETENTION.max,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"webhook_dedup.batch_size",
        c"Rows one maintenance step handles per pass.",
        c"Expired leases swept, keys past retention deleted and history rows pruned per step \
          and pass; run_maintenance() reports more = true when a step had more. The rows a \
          step changes stay locked until it commits (row locks, not entries of the lock table).",
        &BATCH_SIZE,
        settings::BATCH_SIZE.min,
        settings::BATCH_SIZE.max,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"webhook_dedup.maintenance_duty_cycle",
        c"Percent of its time the worker may spend in passes while it catches up with a backlog.",
        c"After a pass that left work (more = true) the worker rests pass time * (100 - duty) / duty \
          before the next one; 100 runs passes back to back. Re-read on reload.",
        &MAINTENANCE_DUTY_CYCLE,
        1,
        100,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"webhook_dedup.duplicate_record_interval",
        c"How long after a key's last recorded activity a duplicate of it is answered without writing.",
        c"Within it a duplicate (duplicate, in_progress, retry_later, unknown_outcome, dead_lettered) \
          is answered from the stored row under READ COMMITTED with no write, no transaction id and no \
          WAL; the per-source counters count it, the key's deliveries and last_seen_at do not. \
          0 records every duplicate on its key. Superuser-only: a receiver cannot change it.",
        &DUPLICATE_RECORD_INTERVAL_S,
        settings::DUPLICATE_RECORD_INTERVAL.min,
        settings::DUPLICATE_RECORD_INTERVAL.max,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_bool_guc(
        c"webhook_dedup.direct_writes",
        c"Claims write keys with the executor's routines directly rather than through SQL statements.",
        c"Same results either way (src/store/direct_writes/ declines to SQL whenever the SQL would do more: an \
          altered table, missing privileges, row-level security, a read-only or SERIALIZABLE transaction; \
          docs/design.md). Distributed on Citus, it also governs the local-shard fast path (a source's \
          shard written directly on the node that holds it; docs/distributed.md). Off compares the two, or \
          steps around a fault.",
        &DIRECT_WRITES,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"webhook_dedup.default_lease",
        c"Lease given by webhook_claim when the call passes none.",
        c"A claimed key is held for this long; after it expires without completion \
          the next delivery of the key reclaims it. Must be positive.",
        &DEFAULT_LEASE_S,
        settings::DEFAULT_LEASE.min,
        settings::DEFAULT_LEASE.max,
        GucContext::Userset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"webhook_dedup.max_attempts",
        c"Processing attempts after which a failing key is dead-lettered.",
        c"webhook_fail sends a key to dead_lettered once its attempt reaches this number; \
          webhook_dedup.sources.max_attempts overrides it per source.",
        &MAX_ATTEMPTS,
        settings::MAX_ATTEMPTS.min,
        settings::MAX_ATTEMPTS.max,
        GucContext::Userset,
        GucFlags::default(),
    );
    // SAFETY: called from _PG_init in the postmaster or a backend; reserving
    // the prefix makes a mistyped webhook_dedup.* setting an error.
    #[cfg(not(any(feature = "pg13", feature = "pg14")))]
    unsafe {
        pgrx::pg_sys::MarkGUCPrefixReserved(c"webhook_dedup".as_ptr());
    }
}

/// `webhook_dedup.default_lease` in microseconds.
pub fn default_lease_us() -> i64 {
    i64::from(DEFAULT_LEASE_S.get()) * 1_000_000
}

/// `webhook_dedup.max_attempts`.
pub fn max_attempts() -> i32 {
    MAX_ATTEMPTS.get()
}

/// `webhook_dedup.database`.
pub fn database() -> String {
    DATABASE.get().map_or_else(|| "postgres".to_owned(), |db| db.to_string_lossy().into_owned())
}

/// `webhook_dedup.maintenance_interval` in seconds (0: the worker's passes are off).
pub fn maintenance_interval_s() -> u64 {
    u64::try_from(MAINTENANCE_INTERVAL_S.get()).unwrap_or(0)
}

/// `webhook_dedup.maintenance_duty_cycle`, in percent (1 to 100).
pub fn maintenance_duty_cycle() -> u32 {
    MAINTENANCE_DUTY_CYCLE.get().clamp(1, 100) as u32
}

/// `webhook_dedup.duplicate_record_interval` in microseconds.
pub fn duplicate_record_interval_us() -> i64 {
    i64::from(DUPLICATE_RECORD_INTERVAL_S.get()) * 1_000_000
}

/// `webhook_dedup.direct_writes`.
pub fn direct_writes() -> bool {
    DIRECT_WRITES.get()
}

/// `webhook_dedup.retention` in microseconds.
pub fn retention_us() -> i64 {
    i64::from(RETENTION_S.get()) * 1_000_000
}

/// `webhook_dedup.batch_size`.
pub fn batch_size() -> i64 {
    i64::from(BATCH_SIZE.get())
}
