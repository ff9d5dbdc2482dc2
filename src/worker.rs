//! The background worker: it only schedules. Every
//! `webhook_dedup.maintenance_interval` it runs one maintenance pass (the
//! steps of `webhook_dedup.run_maintenance()`, [`crate::maintenance::Run`]),
//! and further passes while a pass reports `more`, each after a rest that
//! keeps it to `webhook_dedup.maintenance_duty_cycle` of the time. Where
//! `run_maintenance()` runs a pass in the caller's one transaction, the
//! worker commits after every step, so that each step's row locks last
//! only as long as the step (a key the sweep moved is free for its retry
//! at once). It runs
//! under READ COMMITTED whatever `default_transaction_isolation` says. The
//! loop follows pg_cron's launcher and PostgreSQL's `worker_spi` example:
//!
//! - registered from `_PG_init` only when the library is in
//!   `shared_preload_libraries` (static workers cannot be registered
//!   later);
//! - connects to `webhook_dedup.database` (read once: `PGC_POSTMASTER`);
//! - starts when recovery has finished, so it does nothing on a standby
//!   (and starts on promotion);
//! - while the extension is not installed in that database it waits
//!   quietly (DEBUG1) and checks again every [`IDLE_RECHECK`], so that
//!   `CREATE EXTENSION` needs no restart. PostgreSQL's documentation says a
//!   worker that should pause "should use an interruptible sleep rather
//!   than exiting" (exit code 0 would unregister it until the next restart);
//! - re-reads `postgresql.conf` on SIGHUP itself (pgrx 0.18's handler only
//!   sets a flag and the latch), so a new interval applies at once;
//! - on SIGTERM (shutdown, `pg_terminate_backend`) exits with code 1, so
//!   that the postmaster starts it again after [`RESTART_AFTER`] unless the
//!   server is shutting down: at once while it sleeps (logging that it
//!   stops), and in the middle of a pass at the next interrupt check of the
//!   statement it runs, as PostgreSQL's own `die()` handler ends any backend
//!   (FATAL "terminating background worker ... due to administrator
//!   command"): a fast shutdown never waits for a pass of five steps of up
//!   to `batch_size` rows each ([`on_sigterm`]). After an ERROR it exits the
//!   same way and is restarted (pgrx's default is never);
//! - shows as `backend_type` and `application_name`
//!   `webhook_dedup maintenance` in `pg_stat_activity`, with the pass it is
//!   running as its query.

use crate::maintenance::{Pass, Run, Step};
use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags};
use pgrx::prelude::*;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// SIGTERM arrived ([`on_sigterm`]).
static TERMINATED: AtomicBool = AtomicBool::new(false);
/// A maintenance pass is running: SIGTERM ends it at its next interrupt
/// check.
static IN_PASS: AtomicBool = AtomicBool::new(false);

/// PostgreSQL's own `die()` and `SetLatch()`, declared here without pgrx's
/// `#[pg_guard]` wrapper (whose thread check, `sigsetjmp` and saved error
/// context are not for a signal handler): both are written to be called
/// from one (`die` is every backend's SIGTERM handler; `SetLatch` is
/// documented as safe in signal handlers, src/backend/storage/ipc/latch.c).
mod signal_safe {
    extern "C" {
        pub fn die(signal: std::ffi::c_int);
        pub fn SetLatch(latch: *mut pgrx::pg_sys::Latch);
    }
}

/// This thread's `errno`, which a signal handler must leave as it found it.
fn errno_location() -> *mut std::ffi::c_int {
    // SAFETY: libc's accessor of the calling thread's errno.
    #[cfg(target_os = "linux")]
    let location = unsafe { libc::__errno_location() };
    // SAFETY: as above (the BSDs' and macOS's name for it).
    #[cfg(any(target_os = "macos", target_os = "freebsd", target_os = "openbsd", target_os = "netbsd"))]
    let location = unsafe { libc::__error() };
    location
}

/// The worker's SIGTERM handler. pgrx's only sets a flag that the loop
/// reads between passes, so a pass in progress (five steps of up to
/// `batch_size` rows) ran to its end first. Here, while a pass runs, it is
/// PostgreSQL's `die()`, the handler of every backend: the statement in
/// progress stops at its next `CHECK_FOR_INTERRUPTS()` with FATAL and the
/// worker exits (code 1); while the worker sleeps, it sets the flag and
/// the latch, and the loop stops at once. Async-signal-safe: atomics,
/// `die()` and `SetLatch()` called unguarded ([`signal_safe`]), and errno
/// restored as PostgreSQL's own handlers restore it. (A pass ended in its
/// flush step loses the counts that step had taken, as a crash would:
/// docs/metrics.md.)
unsafe extern "C-unwind" fn on_sigterm(signal: std::ffi::c_int) {
    // SAFETY: errno of this thread; the PostgreSQL functions are the ones
    // its own signal handlers call, MyLatch is this process's latch.
    unsafe {
        let errno = *errno_location();
        TERMINATED.store(true, Ordering::SeqCst);
        if IN_PASS.load(Ordering::SeqCst) {
            signal_safe::die(signal);
        } else {
            signal_safe::SetLatch(pg_sys::MyLatch);
        }
        *errno_location() = errno;
    }
}

/// Whether SIGTERM arrived.
fn terminated() -> bool {
    TERMINATED.load(Ordering::SeqCst)
}

/// Run `body` as a pass: SIGTERM stops it at its next interrupt check.
fn in_pass<R>(body: impl FnOnce() -> R) -> R {
    IN_PASS.store(true, Ordering::SeqCst);
    // a SIGTERM that came just before the flag was set is honoured now
    if terminated() {
        // SAFETY: what the handler would have done.
        unsafe { pg_sys::die(pg_sys::SIGTERM as std::ffi::c_int) };
        pg_sys::check_for_interrupts!();
    }
    let result = body();
    IN_PASS.store(false, Ordering::SeqCst);
    result
}

/// `backend_type`, `application_name` and the worker's name.
pub const NAME: &str = "webhook_dedup maintenance";

/// The postmaster starts the worker again this long after it exited with
/// an error or was terminated.
pub const RESTART_AFTER: Duration = Duration::from_secs(5);

/// How often an idle worker (extension not installed, or
/// `maintenance_interval = 0`) looks again.
pub const IDLE_RECHECK: Duration = Duration::from_secs(10);

/// Passes in a row while each reports `more`, before the worker sleeps
/// anyway (so that a step that always reports more cannot spin).
const MAX_PASSES_IN_A_ROW: u32 = 100;

/// Register the worker; call from `_PG_init` while
/// `shared_preload_libraries` is being processed.
pub fn register() {
    BackgroundWorkerBuilder::new(NAME)
        .set_type(NAME)
        .set_library("webhook_dedup")
        .set_function("webhook_dedup_worker_main")
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(RESTART_AFTER))
        .load();
}

/// Why the loop stopped.
enum Stop {
    Terminated,
}

fn report_activity(query: Option<&std::ffi::CStr>) {
    // SAFETY: called in a connected worker; the string outlives the call
    // (pgstat copies it).
    unsafe {
        match query {
            Some(q) => pg_sys::pgstat_report_activity(pg_sys::BackendState::STATE_RUNNING, q.as_ptr()),
            None => pg_sys::pgstat_report_activity(pg_sys::BackendState::STATE_IDLE, std::ptr::null()),
        }
    }
}

/// Whether the extension is installed in the worker's database, at this
/// library's version (until `ALTER EXTENSION ... UPDATE` runs after an
/// upgrade, its statements would fail on tables of another shape).
fn extension_installed() -> bool {
    BackgroundWorker::transaction(|| match crate::spi::installed_version() {
        Some(version) if version == env!("CARGO_PKG_VERSION") => true,
        Some(version) => {
            pgrx::log!(
                "webhook_dedup maintenance worker: the extension's SQL objects are version {version}, the library \
                 {}: waiting for ALTER EXTENSION webhook_dedup UPDATE",
                env!("CARGO_PKG_VERSION")
            );
            false
        }
        None => false,
    })
}

/// A line in the server log for a pass that changed something or failed.
fn log_pass(pass: &Pass) {
    if pass.did_something() || !pass.errors.is_empty() {
        pgrx::log!(
            "webhook_dedup maintenance: {} leases expired, {} dead-lettered, {} keys past retention deleted \
             ({} kept: active since), {} history rows pruned, {} archived deliveries deleted, {} archive \
             partitions made, {} dropped{}",
            pass.leases_expired,
            pass.dead_lettered,
            pass.keys_pruned,
            pass.keys_kept,
            pass.history_pruned,
            pass.payloads_pruned,
            pass.partitions_created,
            pass.partitions_dropped,
            if pass.errors.is_empty() { String::new() } else { format!("; failed: {}", pass.errors.join("; ")) }
        );
    }
}

/// One pass, one transaction per step (so the rows a step locked are free
/// as soon as it is done), and the record of the pass with the last.
/// None when no pass ran (a standby, or another pass holds the lock).
fn one_pass() -> Option<Pass> {
    let mut run = BackgroundWorker::transaction(|| {
        Run::begin().map(|mut run| {
            run.step(Step::ALL[0]);
            run
        })
    })?;
    for (i, step) in Step::ALL.iter().enumerate().skip(1) {
        let last = i + 1 == Step::ALL.len();
        let run_ref = AssertUnwindSafe(&mut run);
        BackgroundWorker::transaction(move || {
            let run = run_ref;
            if Run::resume() {
                run.0.step(*step);
            }
            if last {
                run.0.record();
            }
        });
    }
    Some(run.pass)
}

/// The rest after a pass of `took` that left work, for a duty cycle of
/// `duty` percent: `took * (100 - duty) / duty`.
pub fn rest_after(took: Duration, duty: u32) -> Duration {
    let duty = duty.clamp(1, 100);
    took.saturating_mul(100 - duty) / duty
}

/// Run passes until one has nothing more waiting, resting between them as
/// `webhook_dedup.maintenance_duty_cycle` says. Returns early on SIGTERM;
/// Ok(true) when it stopped at [`MAX_PASSES_IN_A_ROW`] with work left.
fn passes() -> Result<bool, Stop> {
    for _ in 0..MAX_PASSES_IN_A_ROW {
        let started = Instant::now();
        report_activity(Some(c"SELECT * FROM webhook_dedup.run_maintenance()"));
        let pass = in_pass(one_pass);
        report_activity(None);
        if let Some(pass) = &pass {
            log_pass(pass);
        }
        if terminated() {
            return Err(Stop::Terminated);
        }
        if !pass.is_some_and(|p| p.more) {
            return Ok(false);
        }
        let rest = rest_after(started.elapsed(), crate::guc::maintenance_duty_cycle());
        if !rest.is_zero() && !BackgroundWorker::wait_latch(Some(rest)) {
            return Err(Stop::Terminated);
        }
        if terminated() {
            return Err(Stop::Terminated);
        }
    }
    Ok(true)
}

/// The worker's entry point (named in [`register`]).
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn webhook_dedup_worker_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP);
    // SAFETY: installs a handler for this process, as attach_signal_handlers does.
    unsafe {
        #[cfg(not(feature = "pg18"))]
        pg_sys::pqsignal(pg_sys::SIGTERM as i32, Some(on_sigterm));
        #[cfg(feature = "pg18")]
        pg_sys::pqsignal_be(pg_sys::SIGTERM as i32, Some(on_sigterm));
    }
    let database = crate::guc::database();
    BackgroundWorker::connect_worker_to_spi(Some(&database), None);
    // SAFETY: a connected backend; sets this session's application_name
    // (whose assign hook reports it to pg_stat_activity) and its default
    // isolation level (the carry-forward reads on the latest snapshot in
    // any case; READ COMMITTED keeps every write on a fresh one).
    unsafe {
        let name = std::ffi::CString::new(NAME).expect("no NUL");
        for (setting, value) in [
            (c"application_name", name.as_c_str()),
            (c"default_transaction_isolation", c"read committed"),
            // the worker is a superuser session: nothing outside the
            // catalog may stand in for a name it uses
            (c"search_path", c"pg_catalog, pg_temp"),
        ] {
            pg_sys::SetConfigOption(
                setting.as_ptr(),
                value.as_ptr(),
                pg_sys::GucContext::PGC_USERSET,
                pg_sys::GucSource::PGC_S_SESSION,
            );
        }
    }
    pgrx::log!(
        "webhook_dedup maintenance worker started in database \"{database}\" (maintenance_interval {} s)",
        crate::guc::maintenance_interval_s()
    );
    let mut last_start: Option<Instant> = None;
    let mut installed_before: Option<bool> = None;
    let mut next = Instant::now();
    loop {
        let wait = next.saturating_duration_since(Instant::now());
        // false: the postmaster died
        if !BackgroundWorker::wait_latch(Some(wait)) || terminated() {
            break;
        }
        let interval = Duration::from_secs(crate::guc::maintenance_interval_s());
        if BackgroundWorker::sighup_received() {
            // SAFETY: the documented way for a backend to apply a reload.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
            let interval = Duration::from_secs(crate::guc::maintenance_interval_s());
            pgrx::log!(
                "webhook_dedup maintenance worker: configuration reloaded (maintenance_interval {} s)",
                interval.as_secs()
            );
            next = match last_start {
                Some(start) if !interval.is_zero() => start + interval,
                _ => Instant::now(),
            };
            continue;
        }
        if Instant::now() < next {
            continue; // woken early by the latch for nothing we handle
        }
        if interval.is_zero() {
            next = Instant::now() + IDLE_RECHECK;
            continue;
        }
        let installed = extension_installed();
        if installed_before != Some(installed) {
            if installed {
                pgrx::debug1!("webhook_dedup maintenance worker: the extension is installed in \"{database}\"");
            } else {
                pgrx::debug1!(
                    "webhook_dedup maintenance worker: the extension is not installed in \"{database}\"; waiting"
                );
            }
            installed_before = Some(installed);
        }
        if !installed {
            next = Instant::now() + IDLE_RECHECK;
            continue;
        }
        let start = Instant::now();
        last_start = Some(start);
        match passes() {
            Err(Stop::Terminated) => break,
            // A backlog longer than MAX_PASSES_IN_A_ROW: a full interval of
            // rest before the next round, so it never runs back to back.
            Ok(true) => next = Instant::now() + interval,
            Ok(false) => next = start + interval,
        }
    }
    pgrx::log!("webhook_dedup maintenance worker stopping");
    // SAFETY: ends this process. Exit code 1: the postmaster starts the
    // worker again after RESTART_AFTER unless it is shutting down (exit
    // code 0 would unregister it until the next server start).
    unsafe { pg_sys::proc_exit(1) };
}

#[cfg(test)]
mod tests {
    use super::rest_after;
    use std::time::Duration;

    #[test]
    fn the_rest_keeps_the_duty_cycle() {
        let pass = Duration::from_millis(100);
        assert_eq!(rest_after(pass, 20), Duration::from_millis(400), "20%: 100 ms of work in every 500");
        assert_eq!(rest_after(pass, 50), Duration::from_millis(100));
        assert_eq!(rest_after(pass, 100), Duration::ZERO, "100%: back to back");
        assert_eq!(rest_after(pass, 0), Duration::from_millis(9_900), "clamped to 1%");
    }
}
