//! Every `webhook_dedup.*` setting: private statics, typed accessors, one
//! [`init`]. Contexts are chosen deliberately (see `docs/operations.md`):
//! `PGC_SIGHUP` for what maintenance reads, `PGC_USERSET` for per-session
//! defaults of a call (`PGC_POSTMASTER` will hold what the worker reads once).

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};

/// Lease given by `webhook_claim` when the call passes none, in seconds.
/// Source of the default: issue "claim state machine" (5 minutes), long
/// enough for a slow handler, short enough that a crashed one is retried
/// within a provider's first retry.
static DEFAULT_LEASE_S: GucSetting<i32> = GucSetting::<i32>::new(300);

/// Processing attempts after which `webhook_fail` dead-letters a key,
/// unless `webhook_dedup.sources` sets another number for its source.
static MAX_ATTEMPTS: GucSetting<i32> = GucSetting::<i32>::new(10);

/// Width of one time partition of `webhook_dedup.keys`, in seconds.
static PARTITION_INTERVAL_S: GucSetting<i32> = GucSetting::<i32>::new(86_400);

/// How many partitions `run_maintenance()` keeps created ahead of now.
static PREMAKE: GucSetting<i32> = GucSetting::<i32>::new(4);

pub fn init() {
    GucRegistry::define_int_guc(
        c"webhook_dedup.default_lease",
        c"Lease given by webhook_claim when the call passes none.",
        c"A claimed key is held for this long; after it expires without completion \
          the next delivery of the key reclaims it. Must be positive.",
        &DEFAULT_LEASE_S,
        1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"webhook_dedup.max_attempts",
        c"Processing attempts after which a failing key is dead-lettered.",
        c"webhook_fail sends a key to dead_lettered once its attempt reaches this number; \
          webhook_dedup.sources.max_attempts overrides it per source.",
        &MAX_ATTEMPTS,
        1,
        i32::MAX,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"webhook_dedup.partition_interval",
        c"Width of one time partition of webhook_dedup.keys.",
        c"Used by webhook_dedup.run_maintenance() when it creates partitions ahead. \
          Each claim looks a key up in every live partition, so fewer, wider \
          partitions make claims cheaper and retention coarser.",
        &PARTITION_INTERVAL_S,
        3_600,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"webhook_dedup.premake",
        c"Partitions of webhook_dedup.keys created ahead of the current time.",
        c"webhook_dedup.run_maintenance() keeps this many future partitions, so \
          claims never fall into the default partition while maintenance runs.",
        &PREMAKE,
        1,
        1_000,
        GucContext::Sighup,
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

/// `webhook_dedup.partition_interval` in microseconds.
pub fn partition_interval_us() -> i64 {
    i64::from(PARTITION_INTERVAL_S.get()) * 1_000_000
}

pub fn premake() -> i64 {
    i64::from(PREMAKE.get())
}
