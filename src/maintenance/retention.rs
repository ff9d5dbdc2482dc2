//! Retention: how long each source's history is kept
//! (`webhook_dedup.sources.retention`, else `webhook_dedup.retention`), and
//! the check that it covers the provider's retry horizon
//! (`webhook_dedup.retention_warnings`).

use super::Counts;
use pgrx::datum::Interval;
use pgrx::spi::Spi;
use std::cell::Cell;

/// The retentions a pass works with, in microseconds.
#[derive(Debug, Clone)]
pub struct Retention {
    /// `webhook_dedup.retention`: sources without their own.
    pub default_us: i64,
    /// The shortest retention of any source, and of the setting: no history
    /// row younger than this may go (an index bound for the pruning scans).
    pub shortest_us: i64,
}

impl Retention {
    /// The setting alone (when the per-source overrides cannot be read).
    pub fn fallback() -> Retention {
        let default_us = crate::guc::retention_us();
        Retention { default_us, shortest_us: default_us }
    }

    /// Read the setting and the shortest per-source override.
    pub fn load() -> Retention {
        let default_us = crate::guc::retention_us();
        let shortest = crate::spi::select_one::<Interval>(
            "webhook_dedup.sources",
            "SELECT pg_catalog.min(s.retention) FROM webhook_dedup.sources AS s WHERE s.retention IS NOT NULL",
        );
        let shortest_source =
            shortest.and_then(|i| crate::time::duration_us(i, "webhook_dedup.sources.retention").ok());
        let shortest_us = shortest_source.map_or(default_us, |s| s.min(default_us));
        Retention { default_us, shortest_us }
    }
}

/// An interval of `us` microseconds with whole days as days, so that it
/// prints as `30 days` rather than `720:00:00`.
pub fn interval(us: i64) -> Interval {
    const DAY_US: i64 = 86_400 * 1_000_000;
    let days = i32::try_from(us.div_euclid(DAY_US)).unwrap_or(i32::MAX);
    Interval::new(0, days, us.rem_euclid(DAY_US)).unwrap_or_else(|_| Interval::from_micros(us))
}

/// How often one backend (the worker) repeats the same retention WARNING
/// in the server log; in between it reports them as NOTICEs.
const REPEAT_WARNING_US: i64 = 3_600 * 1_000_000;

thread_local! {
    /// (warnings, when) of the last WARNING this backend raised.
    static LAST_WARNED: Cell<(i32, i64)> = const { Cell::new((0, i64::MIN)) };
}

/// Count the sources whose retention is shorter than their provider's retry
/// horizon, and say which: a WARNING (once an hour per backend for the same
/// count, so the worker does not fill the log; NOTICE in between).
/// On a distributed install the check is the cluster's, made on the
/// coordinator only (the workers' passes skip it).
pub(super) fn warnings(now: i64, pass: &mut Counts) {
    if crate::citus::keys_distributed() && !crate::store::citus::is_coordinator() {
        return;
    }
    let messages: Vec<String> = Spi::connect(|client| {
        client
            .select("SELECT w.message FROM webhook_dedup.retention_warnings AS w ORDER BY w.source", None, &[])
            .unwrap_or_else(|e| pgrx::error!("webhook_dedup: reading webhook_dedup.retention_warnings: {e}"))
            .filter_map(|row| row.get::<String>(1).ok().flatten())
            .collect()
    });
    let count = messages.len() as i32;
    pass.retention_warnings = count;
    if count == 0 {
        return;
    }
    let (last_count, last_at) = LAST_WARNED.get();
    let repeat = last_count == count && now.saturating_sub(last_at) < REPEAT_WARNING_US;
    for message in &messages {
        if repeat {
            pgrx::notice!("webhook_dedup: {message}");
        } else {
            pgrx::warning!("webhook_dedup: {message}");
        }
    }
    if !repeat {
        LAST_WARNED.set((count, now));
    }
}
