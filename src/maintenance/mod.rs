//! One maintenance pass (`webhook_dedup.run_maintenance()`): the work the
//! background worker ([`crate::worker`]) schedules, callable by hand or
//! from pg_cron. Steps, in this order:
//!
//! 1. [`sweep`]: expired `processing` leases become `failed` (due at once)
//!    or `dead_lettered`;
//! 2. [`prune`]: history past retention (watermarks, conflicts, claim
//!    counts, maintenance runs) and expired keys stranded in the default
//!    partition;
//! 3. the metrics flush ([`crate::metrics::flush`]);
//! 4. [`retention`] warnings: sources kept for less than their provider's
//!    retry horizon;
//! 5. [`partitions`]: create the partitions due (`premake`), then drop at
//!    most one partition past retention, carrying forward what must live on
//!    (never both in one transaction: a pass that created a partition leaves
//!    the drop to the next pass).
//!
//! The steps that take table locks claims also need come last, because
//! every lock lasts until the transaction commits: `run_maintenance()` runs
//! the pass in the caller's transaction (call it on its own, not inside a
//! longer one), the worker commits after the row steps and after each
//! partition step ([`Run`]). Each step runs in its own
//! subtransaction with a `lock_timeout` of 500 ms ([`lock_timeout_ms`]): a step that fails (or gives
//! way to a claim) is rolled back, warned about and listed in `errors`, and
//! the others still run. Two passes never overlap: a pass that cannot take
//! the maintenance lock at once returns `ran = false`. Each step handles at
//! most `webhook_dedup.batch_size` rows; `more` says the next pass has
//! work waiting (the worker then runs it at once, in a new transaction).

pub mod partitions;
pub mod prune;
pub mod retention;
pub mod sweep;

pub use retention::Retention;

use crate::spi::{self, arg, Snap, Statement};
use crate::subxact;
use crate::time::{clock_now, timestamptz};
use pgrx::pg_sys::{self, BOOLOID, INT4OID, INT8OID, TEXTARRAYOID, TIMESTAMPTZOID};

/// Lock id (within this extension's advisory-lock class) that keeps two
/// maintenance runs from overlapping.
const MAINTENANCE_LOCK_ID: u32 = 1;

/// How long a step waits for a lock before giving up until the next pass,
/// in milliseconds: 500, or half of `deadlock_timeout` when that is lower.
/// In a lock cycle with a claim, the process whose wait reaches
/// `deadlock_timeout` first is the one PostgreSQL aborts; staying below it
/// makes maintenance give way first, never the claim.
pub fn lock_timeout_ms() -> i32 {
    // SAFETY: reads a GUC variable of this backend.
    let deadlock_timeout = unsafe { pg_sys::DeadlockTimeout };
    500.min(deadlock_timeout / 2).max(1)
}

static RECORD: Statement = Statement::new(
    crate::sql_statement!("maintenance_record_run.sql"),
    &[
        TIMESTAMPTZOID,
        TIMESTAMPTZOID,
        INT4OID,
        INT4OID,
        INT4OID,
        INT4OID,
        INT8OID,
        INT8OID,
        INT8OID,
        INT8OID,
        INT4OID,
        BOOLOID,
        TEXTARRAYOID,
    ],
);

/// What one pass did (the row `run_maintenance()` returns and
/// `webhook_dedup.maintenance_runs` keeps).
#[derive(Debug, Clone, Default)]
pub struct Pass {
    pub ran: bool,
    pub leases_expired: i32,
    pub dead_lettered: i32,
    pub partitions_created: i32,
    pub partitions_dropped: i32,
    pub keys_carried_forward: i64,
    pub keys_pruned: i64,
    pub history_pruned: i64,
    pub metrics_flushed: i64,
    pub retention_warnings: i32,
    pub more: bool,
    pub errors: Vec<String>,
}

impl Pass {
    fn add(&mut self, step: Pass) {
        self.leases_expired += step.leases_expired;
        self.dead_lettered += step.dead_lettered;
        self.partitions_created += step.partitions_created;
        self.partitions_dropped += step.partitions_dropped;
        self.keys_carried_forward += step.keys_carried_forward;
        self.keys_pruned += step.keys_pruned;
        self.history_pruned += step.history_pruned;
        self.metrics_flushed += step.metrics_flushed;
        self.retention_warnings += step.retention_warnings;
        self.more |= step.more;
        self.errors.extend(step.errors);
    }

    /// Whether the pass changed anything worth a line in the server log.
    pub fn did_something(&self) -> bool {
        self.leases_expired + self.dead_lettered + self.partitions_created + self.partitions_dropped > 0
            || self.keys_carried_forward + self.keys_pruned + self.history_pruned > 0
    }
}

/// The counts of one step, kept only when the step commits.
pub type Step = Pass;

/// Run `body` with formats that do not depend on the session's DateStyle
/// or TimeZone (partition bounds are parsed), and the pass's lock timeout.
fn with_fixed_formats<R>(body: impl FnOnce() -> R) -> R {
    let lock_timeout = format!("{}ms", lock_timeout_ms());
    subxact::with_settings(&[("DateStyle", "ISO, YMD"), ("TimeZone", "UTC"), ("lock_timeout", &lock_timeout)], body)
}

/// Run one step in its own subtransaction; on failure roll it back, warn,
/// and record it in `pass.errors`.
fn step(pass: &mut Pass, what: &str, body: impl FnOnce(&mut Step)) {
    let attempt = subxact::attempt(std::panic::AssertUnwindSafe(|| {
        let mut counts = Step::default();
        with_fixed_formats(|| body(&mut counts));
        counts
    }));
    match attempt {
        Ok(counts) => pass.add(counts),
        Err(failure) => {
            pgrx::warning!(
                "webhook_dedup: maintenance step \"{what}\" failed, the next pass retries it: {} ({:?})",
                failure.message,
                failure.sqlstate
            );
            pass.errors.push(format!("{what}: {} ({:?})", failure.message, failure.sqlstate));
        }
    }
}

/// Try to take the maintenance lock for this transaction.
fn try_lock_maintenance() -> bool {
    // SAFETY: tag initialised as in SET_LOCKTAG_ADVISORY; dontWait = true
    // makes LockAcquire return LOCKACQUIRE_NOT_AVAIL instead of waiting.
    unsafe {
        let tag = pg_sys::LOCKTAG {
            locktag_field1: pg_sys::MyDatabaseId.to_u32(),
            locktag_field2: 0,
            locktag_field3: MAINTENANCE_LOCK_ID,
            locktag_field4: crate::api::protocol::LOCK_CLASS + 1,
            locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
            locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
        };
        pg_sys::LockAcquire(&tag, pg_sys::ExclusiveLock as pg_sys::LOCKMODE, false, true)
            != pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL
    }
}

/// One pass in progress: what it did so far and what it works with. A pass
/// runs in one transaction ([`run`], `run_maintenance()`), or, in the
/// worker, in three: the row steps, then creating partitions, then dropping
/// one, each committed at once, so that no lock is held longer than its
/// step needs ([`crate::worker`]).
pub struct Run {
    pub pass: Pass,
    started: i64,
    batch: i64,
    retention: Retention,
}

impl Run {
    /// Start a pass in the current transaction: None on a standby, or when
    /// another pass holds the maintenance lock.
    pub fn begin() -> Option<Run> {
        // SAFETY: reads shared state; no preconditions.
        if unsafe { pg_sys::RecoveryInProgress() } {
            pgrx::notice!("webhook_dedup: no maintenance on a standby; it runs on the primary");
            return None;
        }
        if !try_lock_maintenance() {
            return None;
        }
        let mut run = Run {
            pass: Pass { ran: true, ..Pass::default() },
            started: clock_now(),
            batch: crate::guc::batch_size(),
            retention: Retention::fallback(),
        };
        let mut loaded = None;
        step(&mut run.pass, "reading retention", |_| loaded = Some(Retention::load()));
        if let Some(retention) = loaded {
            run.retention = retention;
        }
        Some(run)
    }

    /// Continue the pass in a new transaction (the worker's); false when
    /// another pass took the maintenance lock in between.
    pub fn resume() -> bool {
        try_lock_maintenance()
    }

    /// The steps that lock only rows and keys: the lease sweep, pruning,
    /// the metrics flush and the retention check.
    pub fn rows(&mut self) {
        let (now, batch, retention) = (self.started, self.batch, self.retention.clone());
        step(&mut self.pass, "sweeping expired leases", |s| sweep::run(now, batch, s));
        step(&mut self.pass, "pruning history", |s| prune::history(now, batch, &retention, s));
        step(&mut self.pass, "pruning the default partition", |s| prune::default_partition(now, batch, &retention, s));
        step(&mut self.pass, "flushing metrics", |s| s.metrics_flushed = crate::metrics::flush());
        step(&mut self.pass, "checking retention", |s| retention::warnings(now, s));
    }

    /// Create the partitions due (each in its own subtransaction).
    pub fn create_partitions(&mut self) {
        let batch = self.batch;
        step(&mut self.pass, "creating partitions", |s| partitions::create(clock_now(), batch, s));
    }

    /// Drop at most one partition past retention, unless this transaction
    /// created one: creating holds the default partition's lock until
    /// commit, which claims wait for while holding the table's lock that a
    /// drop needs, so the two never share a transaction (`more` asks for
    /// the next pass instead).
    pub fn drop_partition(&mut self, created_in_this_transaction: bool) {
        if created_in_this_transaction {
            self.pass.more = true;
            return;
        }
        let (batch, retention) = (self.batch, self.retention.clone());
        step(&mut self.pass, "dropping partitions", |s| partitions::drop_one(clock_now(), batch, &retention, s));
    }

    /// Keep the pass in `webhook_dedup.maintenance_runs`.
    pub fn record(&self) {
        record(&self.pass, self.started);
    }
}

/// One pass in the current transaction (`run_maintenance()`); `ran` is
/// false (and nothing was done) on a standby or when another pass holds the
/// maintenance lock.
pub fn run() -> Pass {
    let Some(mut run) = Run::begin() else {
        return Pass::default();
    };
    run.rows();
    run.create_partitions();
    let created = run.pass.partitions_created > 0;
    run.drop_partition(created);
    run.record();
    run.pass
}
/// Keep the pass in `webhook_dedup.maintenance_runs` (in the pass's
/// transaction: a pass that rolls back leaves no row).
fn record(pass: &Pass, started: i64) {
    spi::connected(|conn| {
        conn.execute(
            &RECORD,
            &[
                arg(timestamptz(started)),
                arg(timestamptz(clock_now())),
                arg(pass.leases_expired),
                arg(pass.dead_lettered),
                arg(pass.partitions_created),
                arg(pass.partitions_dropped),
                arg(pass.keys_carried_forward),
                arg(pass.keys_pruned),
                arg(pass.history_pruned),
                arg(pass.metrics_flushed),
                arg(pass.retention_warnings),
                arg(pass.more),
                arg(pass.errors.clone()),
            ],
            Snap::Statement,
        );
    });
}
