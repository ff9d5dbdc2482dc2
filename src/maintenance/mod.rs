//! One maintenance pass (`webhook_dedup.run_maintenance()`): the work the
//! background worker ([`crate::worker`]) schedules, callable by hand or
//! from pg_cron. Steps, in this order:
//!
//! 1. [`sweep`]: expired `processing` leases become `failed` (due at once)
//!    or `dead_lettered`;
//! 2. [`expiry`]: completed keys past retention are deleted, with their
//!    payloads, oldest first;
//! 3. [`prune`]: history past retention (watermarks, conflicts, claim
//!    counts, maintenance runs);
//! 4. the metrics flush ([`crate::metrics::flush`]);
//! 5. [`retention`] warnings: sources kept for less than their provider's
//!    retry horizon;
//! 6. [`outbox`]: lapsed sender leases of the outbox taken back, delivered
//!    intents past retention deleted;
//! 7. [`redrive`]: the keys of running bulk redrives moved back to due,
//!    in paced batches;
//! 8. [`archive`]: the payload archive's day partitions made ahead and
//!    dropped whole past the longest payload retention, shorter payload
//!    retentions applied in paced batches.
//!
//! No step waits for a key: the sweep and the expiry lock the rows they
//! change with `SKIP LOCKED`, so a key a claim or its holder is on right
//! now is left for the next pass, and a claim never waits for maintenance
//! longer than one step's commit. Each step runs in its own subtransaction
//! with `search_path` pinned to `pg_catalog, pg_temp` (the pass may run as
//! a superuser: no object of another schema may stand in for a catalog
//! one) and a `lock_timeout` of [`lock_timeout_ms`]: a step that fails is
//! rolled back, warned about and listed in `errors`, and the others still
//! run. `run_maintenance()` runs the whole pass in the caller's
//! transaction; the worker commits after every step ([`Run::step`]), so the
//! rows a step locked are free at once. Two passes never overlap: a pass
//! that cannot take the maintenance lock at once returns `ran = false`.
//! Each step handles at most `webhook_dedup.batch_size` rows; `more` says
//! the next pass has work waiting (the worker then runs it after a rest
//! that keeps it to `webhook_dedup.maintenance_duty_cycle` of the time).

pub mod archive;
pub mod expiry;
pub mod outbox;
pub mod prune;
pub mod redrive;
pub mod retention;
pub mod sweep;

pub use retention::Retention;

use crate::spi;
use crate::store::maintenance_runs;
use crate::subxact;
use crate::time::clock_now;
use pgrx::pg_sys;

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

/// What one pass did (the row `run_maintenance()` returns and
/// `webhook_dedup.maintenance_runs` keeps).
#[derive(Debug, Clone, Default)]
pub struct Pass {
    pub ran: bool,
    pub leases_expired: i32,
    pub dead_lettered: i32,
    pub keys_pruned: i64,
    pub keys_kept: i64,
    pub history_pruned: i64,
    pub metrics_flushed: i64,
    pub retention_warnings: i32,
    pub more: bool,
    pub errors: Vec<String>,
    pub intents_expired: i32,
    pub intents_pruned: i64,
    pub payloads_pruned: i64,
    pub partitions_created: i32,
    pub partitions_dropped: i32,
    pub keys_redriven: i64,
}

impl Pass {
    fn add(&mut self, step: Pass) {
        self.leases_expired += step.leases_expired;
        self.dead_lettered += step.dead_lettered;
        self.keys_pruned += step.keys_pruned;
        self.keys_kept += step.keys_kept;
        self.history_pruned += step.history_pruned;
        self.metrics_flushed += step.metrics_flushed;
        self.retention_warnings += step.retention_warnings;
        self.more |= step.more;
        self.errors.extend(step.errors);
        self.intents_expired += step.intents_expired;
        self.intents_pruned += step.intents_pruned;
        self.payloads_pruned += step.payloads_pruned;
        self.partitions_created += step.partitions_created;
        self.partitions_dropped += step.partitions_dropped;
        self.keys_redriven += step.keys_redriven;
    }

    /// Whether the pass changed anything worth a line in the server log.
    pub fn did_something(&self) -> bool {
        self.leases_expired + self.dead_lettered + self.intents_expired > 0
            || self.keys_pruned + self.keys_kept + self.history_pruned + self.intents_pruned + self.payloads_pruned > 0
            || self.partitions_created + self.partitions_dropped > 0
            || self.keys_redriven > 0
    }
}

/// The counts of one step, kept only when the step commits.
pub type Counts = Pass;

/// The steps of a pass, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Sweep,
    Expire,
    Prune,
    Flush,
    Warn,
    Outbox,
    Redrive,
    Archive,
}

impl Step {
    pub const ALL: [Step; 8] =
        [Step::Sweep, Step::Expire, Step::Prune, Step::Flush, Step::Warn, Step::Outbox, Step::Redrive, Step::Archive];

    fn what(self) -> &'static str {
        match self {
            Step::Sweep => "sweeping expired leases",
            Step::Expire => "deleting keys past retention",
            Step::Prune => "pruning history",
            Step::Flush => "flushing metrics",
            Step::Warn => "checking retention",
            Step::Outbox => "sweeping and pruning the outbox",
            Step::Redrive => "moving redriven keys",
            Step::Archive => "keeping the payload archive",
        }
    }
}

/// Run `body` with `search_path` pinned and the pass's lock timeout.
fn with_pass_settings<R>(body: impl FnOnce() -> R) -> R {
    let lock_timeout = format!("{}ms", lock_timeout_ms());
    subxact::with_settings(&[("search_path", "pg_catalog, pg_temp"), ("lock_timeout", &lock_timeout)], body)
}

/// Run one step in its own subtransaction; on failure roll it back, warn,
/// and record it in `pass.errors`.
fn attempt(pass: &mut Pass, what: &str, body: impl FnOnce(&mut Counts)) {
    let attempt = subxact::attempt(std::panic::AssertUnwindSafe(|| {
        let mut counts = Counts::default();
        with_pass_settings(|| body(&mut counts));
        counts
    }));
    match attempt {
        Ok(counts) => pass.add(counts),
        Err(failure) => {
            pgrx::warning!(
                "webhook_dedup: maintenance step \"{what}\" failed, the next pass retries it: {} ({})",
                failure.message,
                failure.code()
            );
            pass.errors.push(format!("{what}: {} ({})", failure.message, failure.code()));
        }
    }
}

/// One pass in progress: what it did so far and what it works with. A pass
/// runs in one transaction ([`run`], `run_maintenance()`), or, in the
/// worker, one transaction per step, each committed at once.
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
        if !crate::lock::try_maintenance() {
            return None;
        }
        let mut run = Run {
            pass: Pass { ran: true, ..Pass::default() },
            started: clock_now(),
            batch: crate::guc::batch_size(),
            retention: Retention::fallback(),
        };
        let mut loaded = None;
        attempt(&mut run.pass, "reading retention", |_| loaded = Some(Retention::load()));
        if let Some(retention) = loaded {
            run.retention = retention;
        }
        Some(run)
    }

    /// Continue the pass in a new transaction (the worker's); false when
    /// another pass took the maintenance lock in between.
    pub fn resume() -> bool {
        crate::lock::try_maintenance()
    }

    /// Run one step.
    pub fn step(&mut self, step: Step) {
        let (now, batch, retention) = (self.started, self.batch, self.retention.clone());
        attempt(&mut self.pass, step.what(), |c| match step {
            Step::Sweep => sweep::run(now, batch, c),
            Step::Expire => expiry::run(now, batch, &retention, c),
            Step::Prune => prune::history(now, batch, &retention, c),
            Step::Flush => c.metrics_flushed = crate::metrics::flush(),
            Step::Warn => retention::warnings(now, c),
            Step::Outbox => outbox::run(now, batch, &retention, c),
            Step::Redrive => redrive::run(now, batch, &retention, c),
            Step::Archive => archive::run(now, batch, &retention, c),
        });
    }

    /// Keep the pass in `webhook_dedup.maintenance_runs`.
    pub fn record(&self) {
        with_pass_settings(|| record(&self.pass, self.started));
    }
}

/// One pass in the current transaction (`run_maintenance()`); `ran` is
/// false (and nothing was done) on a standby or when another pass holds the
/// maintenance lock.
pub fn run() -> Pass {
    let Some(mut run) = Run::begin() else {
        return Pass::default();
    };
    for step in Step::ALL {
        run.step(step);
    }
    run.record();
    run.pass
}

/// Keep the pass in `webhook_dedup.maintenance_runs` (in the pass's
/// transaction: a pass that rolls back leaves no row).
fn record(pass: &Pass, started: i64) {
    spi::connected(|conn| {
        let run = maintenance_runs::Run {
            started_at: started,
            finished_at: clock_now(),
            leases_expired: pass.leases_expired,
            dead_lettered: pass.dead_lettered,
            keys_pruned: pass.keys_pruned,
            keys_kept: pass.keys_kept,
            history_pruned: pass.history_pruned,
            metrics_flushed: pass.metrics_flushed,
            retention_warnings: pass.retention_warnings,
            more: pass.more,
            errors: &pass.errors,
            intents_expired: pass.intents_expired,
            intents_pruned: pass.intents_pruned,
            payloads_pruned: pass.payloads_pruned,
            partitions_created: pass.partitions_created,
            partitions_dropped: pass.partitions_dropped,
            keys_redriven: pass.keys_redriven,
        };
        maintenance_runs::record(conn, &run);
    });
}
