//! Pausing a source: intake goes on, processing through
//! `webhook_next` stops, until an operator resumes it. The rules:
//!
//! - `pause` records the pause in the source's row of
//!   `webhook_dedup.sources` and parks the source's keys that wait for
//!   `webhook_next` (pending, and failed ones waiting for a retry): their
//!   `due_at` becomes [`crate::claim::PAUSED_DUE_AT`], after every due time,
//!   so that no take meets them and the other sources' work costs what it
//!   did. Keys in flight keep their lease.
//! - A key that becomes due while the source is paused (a new delivery
//!   enqueued, a lapsed lease, a failure's retry) is parked by the
//!   `webhook_next` that meets it, after it confirms the pause on the
//!   source's row held FOR SHARE ([`crate::store::sources::paused_locked`]).
//! - `resume` clears the pause, holding the source's row, so every park in
//!   flight has committed before it unparks: no key stays parked behind a
//!   resume.
//!
//! Claims (`webhook_claim`, `webhook_receive` in claim mode) are intake and
//! are not refused: the receiver that claims a key processes it.
//!
//! Distributed on Citus the same holds: `webhook_dedup.sources` is a
//! reference table, so the pause is written on every node's copy of the
//! row (in one two-phase commit), the `webhook_next` that meets a due key
//! holds its own node's copy `FOR SHARE` (Citus's router planner allows row
//! locks on a reference table, multi_router_planner.c), and `resume`'s
//! update of every copy waits for that lock.

#[pgrx::pg_schema]
mod webhook_dedup {
    use crate::error::OrRaise;
    use crate::spi;
    use crate::store::{queue, sources};
    use crate::time::clock_now;
    use pgrx::prelude::*;

    fn source_arg(source: Option<&str>) -> &str {
        let source = crate::error::required(source, "source");
        crate::key::check_source(source).or_raise();
        source
    }

    /// Pause `source`: `webhook_next` takes none of its keys until
    /// `resume(source)`; intake goes on (claims, `webhook_receive`,
    /// `webhook_enqueue` answer and store as before). Records when, who
    /// (the session user) and `reason` in `webhook_dedup.sources` (a row is
    /// made for a source without one); pausing a paused source keeps the
    /// first pause and replaces the reason. Returns how many of the
    /// source's waiting keys (pending, failed) were parked now. For
    /// operators. Errors: 22004 NULL source; 22023 an empty source or one
    /// over 255 characters.
    #[pg_extern(volatile, parallel_unsafe)]
    fn pause(source: Option<&str>, reason: default!(Option<&str>, "NULL")) -> i64 {
        let source = source_arg(source);
        let by = crate::api::args::session_user();
        spi::connected(|conn| {
            sources::pause(conn, source, clock_now(), &by, reason);
            queue::park(conn, source)
        })
    }

    /// Resume `source`: its parked keys are due again as before the pause
    /// (a failed key at its retry time, a pending key at its first
    /// delivery, so the oldest goes first) and `webhook_next` takes them.
    /// Clears the pause in `webhook_dedup.sources`; unparks any key left
    /// parked even when the source is not paused (its row deleted while
    /// paused). Returns how many keys are due again. For operators.
    /// Errors: 22004 NULL source; 22023 an empty source or one over 255
    /// characters.
    #[pg_extern(volatile, parallel_unsafe)]
    fn resume(source: Option<&str>) -> i64 {
        let source = source_arg(source);
        spi::connected(|conn| {
            sources::resume(conn, source);
            queue::unpark(conn, source)
        })
    }
}
