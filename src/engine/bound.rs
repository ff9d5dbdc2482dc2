//! The deadline every lock wait of one delivery ends by: a provider
//! answers a delivery that takes longer than its response deadline as
//! failed and sends it again, so `webhook_receive` answers `in_progress`
//! by then rather than wait for a lock past it (its `wait`, else the
//! profile's default wait: `crate::profile::default_wait_ms`).

use crate::time::clock_now;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::Cell;

/// Run `stored` (what a delivery reads and writes once verified) with
/// every lock wait it meets ending by `deadline` (microseconds since
/// 2000): in a subtransaction with `lock_timeout` at the time left, at
/// least 1 ms, which `stored` sets again with the [`Bound`] it is given
/// before each step that may wait (the time left shrinks as it sleeps for
/// a holder or waits for a lock). When a wait runs out (55P03) the
/// subtransaction is rolled back, undoing everything `stored` wrote and
/// the counts it made (`crate::metrics::deferring`), and the answer is
/// `None`. A session whose own `lock_timeout` is shorter than the time
/// left keeps it: its 55P03 is raised as before (the caller chose it).
pub fn within<R>(deadline: i64, stored: impl FnOnce(&Bound) -> R) -> Option<R> {
    // SAFETY: reads a GUC variable of this backend (milliseconds, 0: none).
    let session_ms = unsafe { pg_sys::LockTimeout };
    let bound = Bound { deadline, session_ms, set_ms: Cell::new(i32::MAX), session_in_force: Cell::new(false) };
    let (first, session) = bound.effective_ms();
    bound.set_ms.set(first);
    bound.session_in_force.set(session);
    let timeout = format!("{first}ms");
    crate::metrics::deferring(|| {
        crate::subxact::attempt_unless(
            PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
            || !bound.session_in_force.get(),
            std::panic::AssertUnwindSafe(|| {
                crate::subxact::with_settings(&[("lock_timeout", &timeout)], || stored(&bound))
            }),
        )
    })
}

/// The deadline of [`within`]'s lock waits.
pub struct Bound {
    /// Microseconds since 2000.
    deadline: i64,
    /// The session's own `lock_timeout` (milliseconds, 0: none).
    session_ms: i32,
    /// The `lock_timeout` set last, in milliseconds.
    set_ms: Cell<i32>,
    /// Whether that is the session's own (shorter than the time left).
    session_in_force: Cell<bool>,
}

/// How far the time left may fall below the `lock_timeout` in force
/// before [`Bound::refresh`] sets it again, in milliseconds: setting it
/// costs about 2 µs (the GUC machinery), and a wait that ends 10 ms after
/// a deadline of seconds ends in time.
const REFRESH_SLACK_MS: i32 = 10;

impl Bound {
    /// The `lock_timeout` to be in force now, in milliseconds: the time
    /// left, rounded up and at least 1 (0 would be none), or the session's
    /// own where that is shorter (then `true`).
    fn effective_ms(&self) -> (i32, bool) {
        let left = self.deadline.saturating_sub(clock_now()).max(0).saturating_add(999) / 1000;
        let left = left.clamp(1, i64::from(i32::MAX)) as i32;
        if self.session_ms > 0 && self.session_ms <= left {
            (self.session_ms, true)
        } else {
            (left, false)
        }
    }

    /// `lock_timeout` at what [`Bound::effective_ms`] says now, unless the
    /// one in force ends at most [`REFRESH_SLACK_MS`] later. Called before
    /// each step that may wait for a lock.
    pub fn refresh(&self) {
        let (ms, session) = self.effective_ms();
        if self.set_ms.get() - ms > REFRESH_SLACK_MS {
            crate::subxact::set_for_level("lock_timeout", &format!("{ms}ms"));
            self.set_ms.set(ms);
            self.session_in_force.set(session);
        }
    }
}
