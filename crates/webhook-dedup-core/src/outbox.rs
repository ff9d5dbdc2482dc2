//! The transactional outbox's decisions (`docs/outbox.md`). Pure Rust: the
//! extension's `src/store/outbox.rs` reads and writes
//! `webhook_dedup.outbox`, the SQL wrappers in its `src/api/outbox.rs` ask
//! this module what a call means.
//!
//! An **intent** is one downstream call a receiver decided to make while it
//! held a key's lease (`webhook_outbox_put`): written in the receiver's
//! transaction, so it commits or vanishes with the business write and the
//! key's completion. Senders take due intents with a lease
//! (`webhook_outbox_next`), make the call with the intent's downstream key
//! ([`crate::operation_key`]) and report it: `ack` (delivered), `fail`
//! (retry with backoff, dead letter after the source's `max_attempts`) or
//! `unknown` (sent, answer lost: parked for an operator, never retried).
//!
//! An intent runs the **key state machine** of [`crate::claim`], not a copy
//! of it: `pending` (written, due at once), `processing` (leased to a
//! sender until `lease_expires_at`, fenced by its lease token), `completed`
//! (delivered; the downstream's response kept), `failed` (due again at
//! `next_attempt_at`), `unknown_outcome` and `dead_lettered` (wait for
//! `webhook_outbox_resolve`). Leases, reclaims, attempts, the backoff
//! `min(30 s * 2^(attempt - 1), 1 h)`, dead letters after the last attempt,
//! fencing by token and the operator's targets are [`crate::claim`]'s
//! functions, called here.
//!
//! The one rule of the outbox's own: an intent whose downstream has **no
//! idempotency key** (`downstream_idempotent = false`: most e-mail APIs,
//! Slack incoming webhooks) and whose sender's lease lapsed may have been
//! sent already; retrying it blindly could send twice. Such an intent is
//! parked as `unknown_outcome` for reconciliation instead of being taken
//! again. An idempotent downstream deduplicates the repeat by its key, so
//! there a lapsed lease is retried like a key's.

use crate::claim::{self, decide, Decision, FailTo, Outcome, State, Stored, Write};
use crate::error::Error;

/// What `webhook_outbox_next` does with a due intent it locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// Lease it to the caller: its attempt becomes `attempt`. `reclaimed`
    /// when an earlier sender's lease lapsed or a failure came due.
    Lease { attempt: i32, reclaimed: bool },
    /// Due again with no attempts left: dead-letter it.
    DeadLetter,
    /// A lapsed lease of a non-idempotent downstream: park it as
    /// `unknown_outcome` (the lost sender may have sent it).
    Park,
    /// Not due after all (its `due_at` disagreed with its state).
    NotDue,
}

/// Decide what taking the intent stored as `stored` means at `now`, by the
/// claim decision ([`claim::decide`]: a pending intent is claimed, an
/// expired lease or a due failure reclaimed, or dead-lettered when its
/// attempts ran out), then the outbox's own rule (see the module
/// documentation): a lapsed lease of a non-idempotent downstream is parked.
pub fn take(stored: &Stored, now: i64, max_attempts: i32, downstream_idempotent: bool) -> Take {
    let lapsed = stored.state == State::Processing;
    match decide(Some(stored), now, None, max_attempts) {
        Decision { write: Write::Lease { .. } | Write::DeadLetter, .. } if lapsed && !downstream_idempotent => {
            Take::Park
        }
        Decision { write: Write::Lease { attempt }, outcome } => {
            Take::Lease { attempt, reclaimed: outcome == Outcome::Reclaimed }
        }
        Decision { write: Write::DeadLetter, .. } => Take::DeadLetter,
        Decision { write: Write::Insert | Write::Touch, .. } => Take::NotDue,
    }
}

/// Where the maintenance sweep sends an intent whose lease of attempt
/// `attempt` lapsed: as a key's ([`claim::decide_fail`], retryable, due at
/// once) when its downstream is idempotent, else `unknown_outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lapsed {
    Failed { next_attempt_at: i64 },
    DeadLettered,
    UnknownOutcome,
}

pub fn lapsed(attempt: i32, max_attempts: i32, downstream_idempotent: bool, now: i64) -> Lapsed {
    if !downstream_idempotent {
        return Lapsed::UnknownOutcome;
    }
    match claim::decide_fail(attempt, true, Some(0), max_attempts, now) {
        FailTo::Failed { next_attempt_at } => Lapsed::Failed { next_attempt_at },
        FailTo::DeadLettered => Lapsed::DeadLettered,
    }
}

/// The attempt an intent has after an operator resolves it to `to`: sent
/// again (`failed`, `pending`), its attempts start over, so that an intent
/// dead-lettered after its last attempt gets the source's `max_attempts`
/// again instead of a dead letter on its next take ([`take`] would decide
/// `DeadLetter` for it); otherwise unchanged. An intent's attempt fences
/// nothing (its lease token does), so it may go back.
pub fn attempt_after_resolve(to: State, attempt: i32) -> i32 {
    match to {
        State::Failed | State::Pending => 0,
        _ => attempt,
    }
}

/// The `last_error` of an intent whose sender's lease of attempt `attempt`
/// lapsed, which a maintenance pass sent back to be retried (the downstream
/// deduplicates).
pub fn lapsed_error(attempt: i32) -> String {
    format!("lease of attempt {attempt} lapsed without webhook_outbox_ack, _fail or _unknown (swept by maintenance)")
}

/// The `last_error` of an intent parked by [`Take::Park`] or
/// [`Lapsed::UnknownOutcome`].
pub fn parked_error(attempt: i32) -> String {
    format!(
        "lease of attempt {attempt} lapsed without webhook_outbox_ack, _fail or _unknown, and the downstream is not \
         idempotent (downstream_idempotent = false): the call may have been sent; parked for reconciliation"
    )
}

/// The names an intent is filed under: `operation` (what the call does,
/// one per downstream effect of an event: `refund`, `email:receipt`) and
/// `target` (where senders take it from: `stripe-refunds`, `email`),
/// each 1 to 255 characters.
pub fn check_names(operation: &str, target: &str) -> Result<(), Error> {
    crate::key::check_bounded("operation", operation)?;
    crate::key::check_bounded("target", target)
}

/// `batch` of `webhook_outbox_next`: 1 to 1000.
pub fn check_batch(batch: i32) -> Result<i32, Error> {
    if !(1..=1000).contains(&batch) {
        return Err(Error::invalid(format!("batch must be between 1 and 1000, not {batch}")));
    }
    Ok(batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000_000_000;
    const MAX: i32 = 3;

    fn stored(state: State, attempt: i32) -> Stored {
        Stored { state, attempt, lease_expires_at: None, next_attempt_at: None, fingerprint: None }
    }

    #[test]
    fn a_pending_intent_is_leased_as_attempt_one() {
        let s = stored(State::Pending, 0);
        assert_eq!(take(&s, NOW, MAX, true), Take::Lease { attempt: 1, reclaimed: false });
        assert_eq!(take(&s, NOW, MAX, false), Take::Lease { attempt: 1, reclaimed: false });
    }

    #[test]
    fn a_lapsed_lease_is_retried_only_where_the_downstream_deduplicates() {
        let mut s = stored(State::Processing, 1);
        s.lease_expires_at = Some(NOW);
        assert_eq!(take(&s, NOW, MAX, true), Take::Lease { attempt: 2, reclaimed: true });
        assert_eq!(take(&s, NOW, MAX, false), Take::Park);
        s.attempt = MAX;
        assert_eq!(take(&s, NOW, MAX, true), Take::DeadLetter);
        assert_eq!(take(&s, NOW, MAX, false), Take::Park);
        // a live lease is nobody else's
        s.lease_expires_at = Some(NOW + 1);
        assert_eq!(take(&s, NOW, MAX, true), Take::NotDue);
        assert_eq!(take(&s, NOW, MAX, false), Take::NotDue);
    }

    #[test]
    fn a_reported_failure_is_retried_whatever_the_downstream() {
        // the sender said the call failed: no effect to repeat
        let mut s = stored(State::Failed, 1);
        s.next_attempt_at = Some(NOW);
        assert_eq!(take(&s, NOW, MAX, false), Take::Lease { attempt: 2, reclaimed: true });
        s.next_attempt_at = Some(NOW + 1);
        assert_eq!(take(&s, NOW, MAX, false), Take::NotDue);
        // (a failed intent out of attempts cannot be: fail dead-letters the
        // last attempt, and an operator's resolve starts them over)
    }

    #[test]
    fn delivered_and_parked_intents_are_never_taken() {
        for state in [State::Completed, State::UnknownOutcome, State::DeadLettered] {
            for idempotent in [true, false] {
                assert_eq!(take(&stored(state, 1), NOW, MAX, idempotent), Take::NotDue, "{state:?}");
            }
        }
    }

    #[test]
    fn the_sweep_follows_the_same_rules() {
        assert_eq!(lapsed(1, MAX, true, NOW), Lapsed::Failed { next_attempt_at: NOW });
        assert_eq!(lapsed(MAX, MAX, true, NOW), Lapsed::DeadLettered);
        assert_eq!(lapsed(1, MAX, false, NOW), Lapsed::UnknownOutcome);
        // and agrees with take on every attempt
        for attempt in 1..=MAX {
            let mut s = stored(State::Processing, attempt);
            s.lease_expires_at = Some(NOW);
            for idempotent in [true, false] {
                let by_take = match take(&s, NOW, MAX, idempotent) {
                    Take::Lease { .. } => "retry",
                    Take::DeadLetter => "dead",
                    Take::Park => "unknown",
                    Take::NotDue => "none",
                };
                let by_sweep = match lapsed(attempt, MAX, idempotent, NOW) {
                    Lapsed::Failed { .. } => "retry",
                    Lapsed::DeadLettered => "dead",
                    Lapsed::UnknownOutcome => "unknown",
                };
                assert_eq!(by_take, by_sweep, "attempt {attempt}, idempotent {idempotent}");
            }
        }
    }

    #[test]
    fn an_intent_sent_again_by_an_operator_gets_its_attempts_again() {
        // dead-lettered after its last attempt, then resolved to failed
        let mut s = stored(State::Failed, attempt_after_resolve(State::Failed, MAX));
        s.next_attempt_at = Some(NOW);
        assert_eq!(take(&s, NOW, MAX, true), Take::Lease { attempt: 1, reclaimed: true });
        let p = stored(State::Pending, attempt_after_resolve(State::Pending, MAX));
        assert_eq!(take(&p, NOW, MAX, true), Take::Lease { attempt: 1, reclaimed: false });
        // with the reset a failure of it is retried; without it (as a key,
        // whose attempt is a fencing token) the one more attempt is the last
        assert!(matches!(claim::decide_fail(1, true, None, MAX, NOW), FailTo::Failed { .. }));
        let mut kept = stored(State::Failed, MAX);
        kept.next_attempt_at = Some(NOW);
        assert_eq!(take(&kept, NOW, MAX, true), Take::Lease { attempt: MAX + 1, reclaimed: true });
        assert_eq!(claim::decide_fail(MAX + 1, true, None, MAX, NOW), FailTo::DeadLettered);
        for to in [State::Completed, State::DeadLettered] {
            assert_eq!(attempt_after_resolve(to, 7), 7);
        }
    }

    #[test]
    fn names_and_batches_are_bounded() {
        assert!(check_names("refund", "stripe-refunds").is_ok());
        assert!(check_names("", "t").is_err());
        assert!(check_names("op", "").is_err());
        assert!(check_names(&"x".repeat(256), "t").is_err());
        assert!(check_batch(0).is_err());
        assert_eq!(check_batch(1000).unwrap(), 1000);
        assert!(check_batch(1001).is_err());
    }
}
