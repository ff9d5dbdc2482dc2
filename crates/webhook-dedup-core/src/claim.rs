//! The claim state machine: what a delivery of a key means given what is
//! stored for it, and which transitions the holder of a lease, an operator
//! or the queue may make. Pure Rust: the extension's `src/store/` locks the key and reads
//! its row, the SQL wrappers in its `src/api/` ask this module and have the
//! store write what it says.
//!
//! States (`docs/design.md` has the diagram and every transition):
//!
//! | state | meaning |
//! | --- | --- |
//! | `pending` | stored by `webhook_enqueue`, not yet worked |
//! | `processing` | leased to the holder of `claim_token` until `lease_expires_at` |
//! | `completed` | done; `result` is returned to duplicates |
//! | `failed` | a retryable failure; due again at `next_attempt_at` |
//! | `unknown_outcome` | a worker may have acted and lost the answer; waits for an operator |
//! | `dead_lettered` | given up; waits for an operator |
//!
//! Times are microseconds (PostgreSQL `timestamptz`), always the database's
//! clock at the call, never the caller's.

/// A key's stored state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Pending,
    Processing,
    Completed,
    Failed,
    UnknownOutcome,
    DeadLettered,
}

impl State {
    pub const ALL: [State; 6] = [
        State::Pending,
        State::Processing,
        State::Completed,
        State::Failed,
        State::UnknownOutcome,
        State::DeadLettered,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Processing => "processing",
            State::Completed => "completed",
            State::Failed => "failed",
            State::UnknownOutcome => "unknown_outcome",
            State::DeadLettered => "dead_lettered",
        }
    }

    pub fn parse(text: &str) -> Option<State> {
        State::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// What `webhook_claim` tells its caller; see `docs/design.md` for the HTTP
/// answer a receiver gives for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// First delivery: process it.
    Claimed,
    /// An earlier lease expired (or a failure is due): process it again.
    Reclaimed,
    /// Someone holds a live lease: do not process; ask the provider to retry.
    InProgress,
    /// Already completed: do not process; answer with the stored result.
    Duplicate,
    /// Same key, different payload fingerprint: nothing is processed.
    Conflict,
    /// Failed, and the next attempt is not due yet.
    RetryLater,
    /// Waits for an operator (`unknown_outcome`).
    UnknownOutcome,
    /// Waits for an operator (`dead_lettered`).
    DeadLettered,
}

impl Outcome {
    pub const ALL: [Outcome; 8] = [
        Outcome::Claimed,
        Outcome::Reclaimed,
        Outcome::InProgress,
        Outcome::Duplicate,
        Outcome::Conflict,
        Outcome::RetryLater,
        Outcome::UnknownOutcome,
        Outcome::DeadLettered,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Claimed => "claimed",
            Outcome::Reclaimed => "reclaimed",
            Outcome::InProgress => "in_progress",
            Outcome::Duplicate => "duplicate",
            Outcome::Conflict => "conflict",
            Outcome::RetryLater => "retry_later",
            Outcome::UnknownOutcome => "unknown_outcome",
            Outcome::DeadLettered => "dead_lettered",
        }
    }

    /// Whether the caller now holds a lease and must process the event.
    pub fn grants_lease(self) -> bool {
        matches!(self, Outcome::Claimed | Outcome::Reclaimed)
    }
}

/// What is stored for a key, as far as the decision needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub state: State,
    pub attempt: i32,
    pub lease_expires_at: Option<i64>,
    pub next_attempt_at: Option<i64>,
    /// SHA-256 of the first payload seen, when one was given.
    pub fingerprint: Option<Vec<u8>>,
}

/// The write that carries out a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Store a new key, leased to the caller, attempt 1.
    Insert,
    /// Lease the stored key to the caller; the attempt becomes `attempt`.
    Lease { attempt: i32 },
    /// Leave the state alone; record the delivery (and a conflict).
    Touch,
    /// The key is due again but has used all its attempts (its holders
    /// kept dying without calling `webhook_fail`): dead-letter it instead.
    DeadLetter,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub outcome: Outcome,
    pub write: Write,
}

/// Decide what a claim of a key means.
///
/// `fingerprint` is the SHA-256 of this delivery's payload when the caller
/// gave one. A fingerprint differing from the stored one is a `conflict`
/// whatever the state (the same key with other content is never processed
/// and never answered with another payload's result). A key stored without
/// a fingerprint adopts the first one given.
///
/// A key whose lease expired with an `attempt` that already reached
/// `max_attempts` is dead-lettered instead of leased: a message that
/// crashes every worker that takes it must not be redelivered forever. A
/// `failed` key is due with attempts left only (`webhook_fail` and the
/// lease sweep dead-letter the last allowed attempt, [`decide_fail`]), but
/// for one an operator resolved to `failed` ("retry now") after its last
/// attempt: that one gets its attempt, one more whatever its count (its
/// attempt is the fencing token passed downstream, so it is never reset),
/// and a failure of it is dead-lettered again.
pub fn decide(stored: Option<&Stored>, now: i64, fingerprint: Option<&[u8]>, max_attempts: i32) -> Decision {
    let Some(stored) = stored else {
        return Decision { outcome: Outcome::Claimed, write: Write::Insert };
    };
    if let (Some(have), Some(given)) = (stored.fingerprint.as_deref(), fingerprint) {
        if have != given {
            return Decision { outcome: Outcome::Conflict, write: Write::Touch };
        }
    }
    let lease = |outcome| {
        if outcome == Outcome::Reclaimed && stored.state == State::Processing && stored.attempt >= max_attempts {
            return Decision { outcome: Outcome::DeadLettered, write: Write::DeadLetter };
        }
        Decision { outcome, write: Write::Lease { attempt: stored.attempt + 1 } }
    };
    let touch = |outcome| Decision { outcome, write: Write::Touch };
    match stored.state {
        State::Pending => lease(Outcome::Claimed),
        State::Processing if stored.lease_expires_at.is_some_and(|t| t <= now) => lease(Outcome::Reclaimed),
        State::Processing => touch(Outcome::InProgress),
        State::Completed => touch(Outcome::Duplicate),
        State::Failed if stored.next_attempt_at.is_none_or(|t| t <= now) => lease(Outcome::Reclaimed),
        State::Failed => touch(Outcome::RetryLater),
        State::UnknownOutcome => touch(Outcome::UnknownOutcome),
        State::DeadLettered => touch(Outcome::DeadLettered),
    }
}

/// Whether a delivery of a known key that `decision` answers from the
/// stored state ([`Write::Touch`]) must still be written to the key's row,
/// or may be answered with a read alone (a retry storm arrives when the
/// database is already under stress, and the plain `INSERT ... ON CONFLICT
/// DO NOTHING` it replaces writes nothing for a duplicate).
///
/// Written: a conflict (it is recorded in `conflict_log`), a delivery whose
/// fingerprint the key adopts (it has none yet), and any delivery at least
/// `interval_us` after the key's `last_seen_at` (its last recorded
/// activity), which counts it in `deliveries` and restarts its retention
/// from now. `interval_us` 0 writes every one. `now` before `last_seen_at`
/// (a clock stepped back) is within the interval. Every other transition
/// (a lease, a dead letter) always writes.
pub fn records_touch(
    decision: Decision,
    adopts_fingerprint: bool,
    last_seen_at: i64,
    now: i64,
    interval_us: i64,
) -> bool {
    decision.write != Write::Touch
        || decision.outcome == Outcome::Conflict
        || adopts_fingerprint
        || now.saturating_sub(last_seen_at) >= interval_us
}

/// The interval [`records_touch`] is given: `webhook_dedup.duplicate_record_interval`,
/// at most half the source's retention (both microseconds). A duplicate
/// left unrecorded does not restart the key's retention; with the bound, a
/// run of duplicates still records one before the key can expire, so a
/// provider that keeps retrying keeps its key (a retention of 1 minute, the
/// least, against the default interval of 60 s would otherwise let the key
/// go in the middle of a storm, and the next retry be processed again).
pub fn unrecorded_interval(interval_us: i64, retention_us: i64) -> i64 {
    interval_us.min(retention_us / 2)
}

/// Whether `token` holds the lease of a key whose stored state is `state`
/// and lease token `held`: only the current holder of a `processing` key
/// may complete, fail, checkpoint, extend or mark it. A stale token (the
/// lease was reclaimed since, or an operator resolved the key) changes
/// nothing. An expired lease that nobody reclaimed (and maintenance did not
/// sweep yet) still belongs to its holder: fencing is by token, not by clock.
pub fn holds_lease(state: State, held: Option<&[u8]>, token: &[u8]) -> bool {
    state == State::Processing && held == Some(token)
}

/// The first retry waits this long; each later one twice as long as the
/// one before, up to [`MAX_BACKOFF_US`].
pub const BASE_BACKOFF_US: i64 = 30 * 1_000_000;
/// The longest automatic wait between retries: an hour.
pub const MAX_BACKOFF_US: i64 = 3_600 * 1_000_000;

/// The wait before retrying after failed attempt `attempt` (1-based):
/// `min(30 s * 2^(attempt - 1), 1 h)`.
pub fn backoff_us(attempt: i32) -> i64 {
    let doublings = u32::try_from(attempt.max(1) - 1).unwrap_or(0).min(20);
    BASE_BACKOFF_US.saturating_mul(1 << doublings).min(MAX_BACKOFF_US)
}

/// The `last_error` of a key dead-lettered because it came due again after
/// its last allowed attempt `attempt` ([`Write::DeadLetter`]).
pub fn exhausted_error(attempt: i32) -> String {
    format!("due again after attempt {attempt}, the last allowed: dead-lettered")
}

/// The `last_error` of a key whose lease of attempt `attempt` expired at
/// `expired_at` (microseconds since 2000) and that a maintenance pass swept.
pub fn swept_error(attempt: i32, expired_at: i64) -> String {
    format!(
        "lease of attempt {attempt} expired at {} without webhook_complete, webhook_fail or \
         webhook_extend_lease (swept by maintenance)",
        crate::calendar::utc_literal(expired_at)
    )
}

/// Where `webhook_fail` sends a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailTo {
    /// Retryable: due again at `next_attempt_at`.
    Failed { next_attempt_at: i64 },
    /// Not retryable, or out of attempts.
    DeadLettered,
}

/// Decide a failure of attempt `attempt`: a non-retryable failure, or one
/// whose attempt reached `max_attempts`, is dead-lettered; otherwise the key
/// is due again after `retry_after` (when given) or [`backoff_us`].
pub fn decide_fail(attempt: i32, retryable: bool, retry_after_us: Option<i64>, max_attempts: i32, now: i64) -> FailTo {
    if !retryable || attempt >= max_attempts {
        return FailTo::DeadLettered;
    }
    let wait = retry_after_us.unwrap_or_else(|| backoff_us(attempt));
    FailTo::Failed { next_attempt_at: now.saturating_add(wait) }
}

/// The states an operator may move a key to with `webhook_resolve`, from
/// any state: `completed` (it was done after all), `failed` (retry it now),
/// `dead_lettered` (give up), `pending` (hand it to the queue again). Never
/// `processing`: leases come only from claims. Resolving a `processing` key
/// fences its holder out (its token stops working).
pub fn check_resolve_target(to: State) -> Result<State, crate::error::Error> {
    match to {
        State::Completed | State::Failed | State::DeadLettered | State::Pending => Ok(to),
        State::Processing | State::UnknownOutcome => Err(crate::error::Error::invalid(format!(
            "new_state must be completed, failed, dead_lettered or pending, not {}",
            to.as_str()
        ))),
    }
}

/// What `webhook_enqueue` tells its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    /// Stored as `pending` for the workers.
    Accepted,
    /// Already known (in any state): nothing stored.
    Duplicate,
    /// Known with another payload: nothing stored.
    Conflict,
}

impl Enqueued {
    pub fn as_str(self) -> &'static str {
        match self {
            Enqueued::Accepted => "accepted",
            Enqueued::Duplicate => "duplicate",
            Enqueued::Conflict => "conflict",
        }
    }
}

/// Decide an enqueue of a payload with SHA-256 `fingerprint`.
pub fn decide_enqueue(stored: Option<&Stored>, fingerprint: &[u8]) -> Enqueued {
    match stored {
        None => Enqueued::Accepted,
        Some(s) if s.fingerprint.as_deref().is_some_and(|have| have != fingerprint) => Enqueued::Conflict,
        Some(_) => Enqueued::Duplicate,
    }
}

/// When a key in `state` can next be taken by a claim or `webhook_next`
/// (the indexed `due_at` column): a pending key at once, a processing key
/// when its lease expires, a failed key at its next attempt; never for the
/// others.
pub fn due_at(state: State, now: i64, lease_expires_at: Option<i64>, next_attempt_at: Option<i64>) -> Option<i64> {
    match state {
        State::Pending => Some(now),
        State::Processing => lease_expires_at,
        State::Failed => Some(next_attempt_at.unwrap_or(now)),
        State::Completed | State::UnknownOutcome | State::DeadLettered => None,
    }
}

/// The `due_at` of a key parked by a pause of its source
/// (`webhook_dedup.pause`): PostgreSQL's timestamptz `'infinity'`
/// (`TIMESTAMP_NOEND`, `i64::MAX`), after every due time in the index
/// order, so that no take reaches it; `webhook_dedup.resume` puts the key's
/// own due time back.
pub const PAUSED_DUE_AT: i64 = i64::MAX;

/// The longest lease: a year. A lease is a liveness bound on one attempt,
/// not a way to park a key (that is what `dead_lettered` is for), and the
/// bound keeps `now + lease` a finite timestamp.
pub const MAX_LEASE_US: i64 = 365 * 86_400 * 1_000_000;

/// Lease lengths: positive and at most [`MAX_LEASE_US`] (months are
/// refused earlier, when the interval is converted).
pub fn check_lease_us(lease_us: i64) -> Result<i64, crate::error::Error> {
    if lease_us <= 0 {
        return Err(crate::error::Error::invalid("lease must be a positive interval"));
    }
    if lease_us > MAX_LEASE_US {
        return Err(crate::error::Error::invalid("lease must be at most 365 days"));
    }
    Ok(lease_us)
}

/// The fingerprint to decide a known key on: the stored one when it is
/// the SHA-256 of this delivery's raw bytes (`raw`, given when the
/// source's fingerprint rule covers less than the raw body), else
/// `fingerprint`. Identical bytes are identical content, so a key stored
/// under another rule (0.1.0 hashed every `webhook_receive` body raw; a
/// source may change its `fingerprint_pointers`) is no conflict with a
/// byte-identical redelivery.
pub fn same_bytes<'a>(stored: Option<&'a [u8]>, fingerprint: Option<&'a [u8]>, raw: Option<&[u8]>) -> Option<&'a [u8]> {
    match (stored, raw) {
        (Some(have), Some(raw)) if have == raw => Some(have),
        _ => fingerprint,
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_recent_duplicate_is_answered_without_a_write() {
        let minute = 60 * 1_000_000;
        let touch = |outcome| Decision { outcome, write: Write::Touch };
        for outcome in [
            Outcome::Duplicate,
            Outcome::InProgress,
            Outcome::RetryLater,
            Outcome::UnknownOutcome,
            Outcome::DeadLettered,
        ] {
            // within the interval: a read
            assert!(!records_touch(touch(outcome), false, 1_000, 1_000 + minute - 1, minute));
            // at or past it: recorded
            assert!(records_touch(touch(outcome), false, 1_000, 1_000 + minute, minute));
            // a clock stepped back: within
            assert!(!records_touch(touch(outcome), false, 1_000, 0, minute));
            // a fingerprint to adopt, or an interval of 0: recorded
            assert!(records_touch(touch(outcome), true, 1_000, 1_001, minute));
            assert!(records_touch(touch(outcome), false, 1_000, 1_000, 0));
        }
        // the interval is at most half the retention
        assert_eq!(unrecorded_interval(minute, 60 * minute), minute);
        assert_eq!(unrecorded_interval(minute, minute), minute / 2);
        assert!(records_touch(touch(Outcome::Duplicate), false, 0, minute / 2, unrecorded_interval(minute, minute)));
        // a conflict is always recorded, as is every other write
        assert!(records_touch(touch(Outcome::Conflict), false, 1_000, 1_001, minute));
        for write in [Write::Insert, Write::Lease { attempt: 2 }, Write::DeadLetter] {
            assert!(records_touch(Decision { outcome: Outcome::Reclaimed, write }, false, 1_000, 1_001, minute));
        }
    }
    use super::*;

    const NOW: i64 = 1_000_000_000;
    const MAX: i32 = 10;
    const FP_A: &[u8] = &[0xaa; 32];
    const FP_B: &[u8] = &[0xbb; 32];

    fn stored(state: State) -> Stored {
        Stored { state, attempt: 1, lease_expires_at: None, next_attempt_at: None, fingerprint: None }
    }

    fn outcome(s: &Stored) -> Outcome {
        decide(Some(s), NOW, None, MAX).outcome
    }

    #[test]
    fn first_delivery_is_claimed() {
        assert_eq!(decide(None, NOW, None, MAX), Decision { outcome: Outcome::Claimed, write: Write::Insert });
    }

    #[test]
    fn live_lease_is_in_progress_expired_is_reclaimed() {
        let mut s = stored(State::Processing);
        s.lease_expires_at = Some(NOW + 1);
        assert_eq!(decide(Some(&s), NOW, None, MAX), Decision { outcome: Outcome::InProgress, write: Write::Touch });
        s.lease_expires_at = Some(NOW);
        assert_eq!(
            decide(Some(&s), NOW, None, MAX),
            Decision { outcome: Outcome::Reclaimed, write: Write::Lease { attempt: 2 } }
        );
    }

    #[test]
    fn terminal_and_parked_states_are_not_processed() {
        assert_eq!(outcome(&stored(State::Completed)), Outcome::Duplicate);
        assert_eq!(outcome(&stored(State::UnknownOutcome)), Outcome::UnknownOutcome);
        assert_eq!(outcome(&stored(State::DeadLettered)), Outcome::DeadLettered);
        for s in State::ALL {
            let d = decide(Some(&stored(s)), NOW, None, MAX);
            assert_eq!(d.outcome.grants_lease(), matches!(d.write, Write::Lease { .. }), "{s:?}");
        }
    }

    #[test]
    fn failed_keys_wait_for_their_next_attempt() {
        let mut s = stored(State::Failed);
        s.next_attempt_at = Some(NOW + 1);
        assert_eq!(outcome(&s), Outcome::RetryLater);
        s.next_attempt_at = Some(NOW);
        assert_eq!(outcome(&s), Outcome::Reclaimed);
    }

    #[test]
    fn a_key_out_of_attempts_is_dead_lettered_instead_of_reclaimed() {
        let mut s = stored(State::Processing);
        s.lease_expires_at = Some(NOW);
        s.attempt = MAX;
        assert_eq!(
            decide(Some(&s), NOW, None, MAX),
            Decision { outcome: Outcome::DeadLettered, write: Write::DeadLetter }
        );
        // a failed key out of attempts is one an operator resolved to
        // failed (retry now): it gets its attempt, and its failure is final
        let mut f = stored(State::Failed);
        f.attempt = MAX;
        assert_eq!(decide(Some(&f), NOW, None, MAX).write, Write::Lease { attempt: MAX + 1 });
        assert_eq!(decide_fail(MAX + 1, true, None, MAX, NOW), FailTo::DeadLettered);
        // a live lease is still just in progress, whatever the attempt
        s.lease_expires_at = Some(NOW + 1);
        assert_eq!(decide(Some(&s), NOW, None, MAX).outcome, Outcome::InProgress);
        // one attempt left: reclaimed
        s.lease_expires_at = Some(NOW);
        s.attempt = MAX - 1;
        assert_eq!(decide(Some(&s), NOW, None, MAX).write, Write::Lease { attempt: MAX });
    }

    #[test]
    fn pending_keys_are_claimed_by_the_first_claim() {
        let d = decide(Some(&stored(State::Pending)), NOW, None, MAX);
        assert_eq!(d, Decision { outcome: Outcome::Claimed, write: Write::Lease { attempt: 2 } });
    }

    #[test]
    fn a_different_fingerprint_is_a_conflict_in_every_state() {
        for state in State::ALL {
            let mut s = stored(state);
            s.fingerprint = Some(FP_A.to_vec());
            assert_eq!(decide(Some(&s), NOW, Some(FP_B), MAX).outcome, Outcome::Conflict, "{state:?}");
            assert_ne!(decide(Some(&s), NOW, Some(FP_A), MAX).outcome, Outcome::Conflict, "{state:?}");
            // a delivery without payload is never a conflict
            assert_ne!(decide(Some(&s), NOW, None, MAX).outcome, Outcome::Conflict, "{state:?}");
        }
        // a key stored without a fingerprint has nothing to conflict with
        assert_eq!(decide(Some(&stored(State::Completed)), NOW, Some(FP_B), MAX).outcome, Outcome::Duplicate);
    }

    #[test]
    fn only_the_current_token_holds_the_lease() {
        let token = [1u8; 16];
        let other = [2u8; 16];
        assert!(holds_lease(State::Processing, Some(&token), &token));
        assert!(!holds_lease(State::Processing, Some(&other), &token));
        for state in State::ALL.into_iter().filter(|s| *s != State::Processing) {
            assert!(!holds_lease(state, Some(&token), &token), "{state:?}");
        }
    }

    #[test]
    fn backoff_doubles_up_to_an_hour() {
        assert_eq!(backoff_us(1), 30_000_000);
        assert_eq!(backoff_us(2), 60_000_000);
        assert_eq!(backoff_us(3), 120_000_000);
        assert_eq!(backoff_us(8), MAX_BACKOFF_US);
        assert_eq!(backoff_us(i32::MAX), MAX_BACKOFF_US);
        assert_eq!(backoff_us(0), 30_000_000);
    }

    #[test]
    fn failures_retry_until_max_attempts_then_dead_letter() {
        assert_eq!(decide_fail(1, true, None, 3, NOW), FailTo::Failed { next_attempt_at: NOW + 30_000_000 });
        assert_eq!(decide_fail(2, true, Some(5), 3, NOW), FailTo::Failed { next_attempt_at: NOW + 5 });
        assert_eq!(decide_fail(3, true, None, 3, NOW), FailTo::DeadLettered);
        assert_eq!(decide_fail(1, false, None, 3, NOW), FailTo::DeadLettered);
    }

    #[test]
    fn operators_resolve_to_four_states() {
        for s in [State::Completed, State::Failed, State::DeadLettered, State::Pending] {
            assert_eq!(check_resolve_target(s), Ok(s));
        }
        assert!(check_resolve_target(State::Processing).is_err());
        assert!(check_resolve_target(State::UnknownOutcome).is_err());
    }

    #[test]
    fn enqueue_accepts_new_keys_only() {
        assert_eq!(decide_enqueue(None, FP_A), Enqueued::Accepted);
        let mut s = stored(State::Completed);
        assert_eq!(decide_enqueue(Some(&s), FP_A), Enqueued::Duplicate);
        s.fingerprint = Some(FP_A.to_vec());
        assert_eq!(decide_enqueue(Some(&s), FP_A), Enqueued::Duplicate);
        assert_eq!(decide_enqueue(Some(&s), FP_B), Enqueued::Conflict);
    }

    #[test]
    fn due_times_follow_the_state() {
        assert_eq!(due_at(State::Pending, NOW, None, None), Some(NOW));
        assert_eq!(due_at(State::Processing, NOW, Some(NOW + 9), None), Some(NOW + 9));
        assert_eq!(due_at(State::Failed, NOW, None, Some(NOW + 7)), Some(NOW + 7));
        for s in [State::Completed, State::UnknownOutcome, State::DeadLettered] {
            assert_eq!(due_at(s, NOW, Some(1), Some(2)), None);
        }
    }

    #[test]
    fn leases_are_positive_and_bounded() {
        assert!(check_lease_us(0).is_err());
        assert!(check_lease_us(-1).is_err());
        assert_eq!(check_lease_us(1).unwrap(), 1);
        assert_eq!(check_lease_us(MAX_LEASE_US).unwrap(), MAX_LEASE_US);
        assert_eq!(check_lease_us(MAX_LEASE_US + 1).unwrap_err().to_string(), "lease must be at most 365 days");
    }

    #[test]
    fn state_names_round_trip() {
        for s in State::ALL {
            assert_eq!(State::parse(s.as_str()), Some(s));
        }
        assert_eq!(State::parse("done"), None);
    }
}
