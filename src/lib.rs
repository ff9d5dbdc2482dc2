//! webhook_dedup: webhook signature verification, idempotency keys and an
//! at-least-once claim state machine, inside PostgreSQL.
//!
//! Layout (one concern per file; see `docs/design.md`):
//!
//! | module | concern | Postgres? |
//! | --- | --- | --- |
//! | [`signature`] | provider signature schemes, constant-time core | no (pure) |
//! | [`key`] | scoped, bounded idempotency keys | no (pure) |
//! | [`claim`] | the claim state machine: decisions and argument rules | no (pure) |
//! | [`calendar`] | timestamps: the epoch, buckets, UTC literals | no (pure) |
//! | [`profile`] | where each provider puts event id, type and time, how it takes answers | no (pure) |
//! | [`archive`] | the payload archive's day partitions and retention | no (pure) |
//! | [`answer`] | the HTTP answer to a delivery, from its outcome and provider | no (pure) |
//! | [`operation_key`] | downstream idempotency keys derived from the inbound event | no (pure) |
//! | [`error`] | one error type, one SQLSTATE mapping | raising only |
//! | [`guc`] | every `webhook_dedup.*` setting | yes |
//! | [`time`] | timestamptz/interval conversions | yes |
//! | [`spi`] | kept plans executed with an explicit snapshot | yes |
//! | [`store`] | every read and write of keys, payloads, per-source settings | yes |
//! | [`lock`] | the maintenance pass's advisory lock | yes |
//! | [`jsonb`] | `jsonb` passed through without a serde round trip | yes |
//! | [`subxact`] | internal subtransactions and scoped settings | yes |
//! | [`shmem`] | the shared-memory hooks of the modules below | yes |
//! | [`metrics`] | shared-memory counters and their flush | yes |
//! | [`wait`] | the bounded wait for an in-flight duplicate's holder | yes |
//! | [`maintenance`] | one maintenance pass: sweep, retention, pruning | yes |
//! | [`worker`] | the background worker that schedules the passes | yes |
//! | [`citus_guard`] | a NULL source stopped before Citus's function delegation hashes it | yes |
//! | [`api`] | the thin `#[pg_extern]` wrappers (the SQL surface) | yes |
//!
//! Hand-written DDL lives in `src/sql/*.sql`, the text of every statement the
//! extension prepares in `src/sql/statements/*.sql`.

use pgrx::prelude::*;

pub mod answer;
pub mod api;
pub mod archive;
pub mod calendar;
pub mod citus_guard;
pub mod claim;
pub mod error;
pub mod guc;
pub mod handshake;
pub mod intake;
pub mod jsonb;
pub mod key;
pub mod lock;
pub mod maintenance;
pub mod metrics;
pub mod operation_key;
pub mod outbox;
pub mod profile;
pub mod shmem;
pub mod signature;
pub mod spi;
pub mod store;
pub mod subxact;
pub mod time;
pub mod wait;
pub mod worker;

::pgrx::pg_module_magic!(name, version);

// The schema and its tables come first, the views and comments last (after
// every generated function exists).
extension_sql_file!("sql/schema.sql", name = "schema", bootstrap);
extension_sql_file!("sql/distribute.sql", name = "distribute", requires = ["schema"]);
extension_sql_file!("sql/finalize.sql", name = "finalize", finalize);

/// Library load: register settings and, when preloaded, shared memory and
/// the background worker.
///
/// Returns at once under `pg_upgrade` (binary upgrade mode must not start
/// anything). Shared memory and static background workers can only be set
/// up from `shared_preload_libraries`; without it everything but the
/// counters and the worker works the same, and `run_maintenance()` can be
/// called by hand or from pg_cron (see `docs/operations.md`).
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // Long loops of the pure modules over a caller's input (HMAC of a large
    // body, a header with a million signatures) stay cancellable.
    signature::ct::on_interrupt_check(check_for_interrupts);
    // SAFETY: reading a backend-global flag set before any library is loaded.
    if unsafe { pg_sys::IsBinaryUpgrade } {
        return;
    }
    // SAFETY: reading a backend-global flag; true only while the postmaster
    // processes shared_preload_libraries.
    let preloading = unsafe { pg_sys::process_shared_preload_libraries_in_progress };
    guc::init(preloading);
    citus_guard::install(preloading);
    if preloading {
        shmem::init();
        worker::register();
    }
}

/// PostgreSQL's `CHECK_FOR_INTERRUPTS()`: raises (as a Rust panic that
/// pgrx turns back into the error) on a cancel, a terminate or a timeout,
/// and absorbs pending barriers.
fn check_for_interrupts() {
    pgrx::pg_sys::check_for_interrupts!();
}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries = 'webhook_dedup'"]
    }
}
