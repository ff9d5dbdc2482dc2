//! webhook_dedup: webhook signature verification, idempotency keys and an
//! at-least-once claim state machine, inside PostgreSQL.
//!
//! Layout (one concern per file; see `docs/design.md`, "Layout"): the pure
//! rules live in the `webhook-dedup-core` crate (`crates/webhook-dedup-core`:
//! signature schemes, keys, the claim decisions, calendar, provider
//! profiles, intake rules, handshakes, the archive's days, the HTTP answer,
//! operation keys, the outbox decisions, the error type), re-exported here
//! under their module names. This crate is the PostgreSQL glue:
//!
//! | module | concern |
//! | --- | --- |
//! | [`error`] | the core's error raised with its SQLSTATE |
//! | [`guc`] | every `webhook_dedup.*` setting |
//! | [`time`] | timestamptz/interval conversions |
//! | [`spi`] | kept plans executed with an explicit snapshot |
//! | [`store`] | every read and write of keys, payloads, per-source settings |
//! | [`lock`] | the maintenance pass's advisory lock |
//! | [`jsonb`] | `jsonb` passed through without a serde round trip |
//! | [`subxact`] | internal subtransactions and scoped settings |
//! | [`shmem`] | the shared-memory hooks of the modules below |
//! | [`metrics`] | shared-memory counters and their flush |
//! | [`wait`] | the bounded wait for an in-flight duplicate's holder |
//! | [`maintenance`] | one maintenance pass: sweep, retention, pruning |
//! | [`worker`] | the background worker that schedules the passes |
//! | [`relcache`] | relation cache invalidations of the extension's tables, as a generation |
//! | [`citus`] | whether the keys table is a Citus table, and which Citus is loaded |
//! | [`citus_guard`] | a NULL source stopped before Citus's function delegation hashes it |
//! | [`engine`] | the intake engine: each path of a delivery over the store |
//! | [`api`] | the thin `#[pg_extern]` wrappers (the SQL surface) |
//!
//! Hand-written DDL lives in `src/sql/*.sql`, the text of every statement the
//! extension prepares in `src/sql/statements/*.sql`.

use pgrx::prelude::*;

// The pure core (crates/webhook-dedup-core), under the paths the glue uses.
pub use webhook_dedup_core::{
    answer, archive, calendar, claim, handshake, intake, key, operation_key, outbox, profile, signature,
};

pub mod api;
pub mod citus;
pub mod citus_guard;
pub mod engine;
pub mod error;
pub mod guc;
pub mod jsonb;
pub mod lock;
pub mod maintenance;
pub mod metrics;
pub mod relcache;
pub mod shmem;
pub mod spi;
pub mod store;
pub mod subxact;
#[cfg(feature = "pg_test")]
mod tests;
pub mod time;
pub mod wait;
pub mod worker;

::pgrx::pg_module_magic!(name, version);

// The hand-written SQL (src/sql/*.sql, one file per concern). The schema and
// its tables come first (`bootstrap`), the comments last (`finalize`: after
// every generated function, and the roles privileges.sql makes). pgrx puts
// every other file only after what its `requires` names, in an order that
// changes from build to build otherwise: a file requires each function and
// view it names when it runs (a view reads it, a grant names it), by its Rust
// name for a #[pg_extern] function, by block name for the rest
// (tests/contrib/test_sql_requires.py checks it).
extension_sql_file!("sql/schema.sql", name = "schema", bootstrap);
extension_sql_file!("sql/distribute.sql", name = "distribute", requires = ["schema"]);
// The functions written in PL/pgSQL (their bodies' names resolve when they run).
extension_sql_file!("sql/functions.sql", name = "functions", requires = ["schema"]);
extension_sql_file!(
    "sql/views.sql",
    name = "views",
    requires = ["functions", default_retention, downstream_key_limits_rows, provider_profiles]
);
// pg_dump's registrations, the triggers, the check of a source's settings.
extension_sql_file!("sql/tables.sql", name = "tables", requires = ["sources_changed", source_intake_valid]);
extension_sql_file!(
    "sql/privileges.sql",
    name = "privileges",
    requires = [
        "functions",
        "views",
        "sources_changed",
        add_secret,
        cancel_redrive,
        default_retention,
        flush_metrics,
        list_secrets,
        metrics_live,
        pause,
        provider_profiles,
        reconcile,
        redact,
        redrive,
        resume,
        retire_secret,
        run_maintenance,
        source_node,
        unseen,
        webhook_advance,
        webhook_checkpoint,
        webhook_claim,
        webhook_claim_many,
        webhook_complete,
        webhook_enqueue,
        webhook_extend_lease,
        webhook_fail,
        webhook_forget,
        webhook_mark_unknown,
        webhook_next,
        webhook_outbox_ack,
        webhook_outbox_fail,
        webhook_outbox_next,
        webhook_outbox_put,
        webhook_outbox_resolve,
        webhook_outbox_unknown,
        webhook_receive,
        webhook_resolve,
    ]
);
extension_sql_file!("sql/comments.sql", name = "comments", finalize);

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
