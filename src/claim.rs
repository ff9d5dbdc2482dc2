//! The claim state machine: what a delivery of a key means given what is
//! stored for it. Pure Rust: the SQL glue in [`crate::api::claim`] locks the
//! key, reads the stored row, asks [`decide`] and writes what it says.
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
pub fn decide(stored: Option<&Stored>, now: i64, fingerprint: Option<&[u8]>) -> Decision {
    let Some(stored) = stored else {
        return Decision {
            outcome: Outcome::Claimed,
            write: Write::Insert,
        };
    };
    if let (Some(have), Some(given)) = (stored.fingerprint.as_deref(), fingerprint) {
        if have != given {
            return Decision {
                outcome: Outcome::Conflict,
                write: Write::Touch,
            };
        }
    }
    let lease = |outcome| Decision {
        outcome,
        write: Write::Lease {
            attempt: stored.attempt + 1,
        },
    };
    let touch = |outcome| Decision {
        outcome,
        write: Write::Touch,
    };
    match stored.state {
        State::Pending => lease(Outcome::Claimed),
        State::Processing if stored.lease_expires_at.is_some_and(|t| t <= now) => {
            lease(Outcome::Reclaimed)
        }
        State::Processing => touch(Outcome::InProgress),
        State::Completed => touch(Outcome::Duplicate),
        State::Failed if stored.next_attempt_at.is_none_or(|t| t <= now) => {
            lease(Outcome::Reclaimed)
        }
        State::Failed => touch(Outcome::RetryLater),
        State::UnknownOutcome => touch(Outcome::UnknownOutcome),
        State::DeadLettered => touch(Outcome::DeadLettered),
    }
}

/// Whether `webhook_complete` with `token` may complete a key whose stored
/// state is `state` and lease token `held`: only the current lease holder of
/// a `processing` key may. A stale token (the lease was reclaimed since)
/// changes nothing. An expired lease that nobody reclaimed still belongs to
/// its holder: fencing is by token, not by clock.
pub fn may_complete(state: State, held: Option<&[u8]>, token: &[u8]) -> bool {
    state == State::Processing && held == Some(token)
}

/// The longest lease: a year. A lease is a liveness bound on one attempt,
/// not a way to park a key (that is what `dead_lettered` is for), and the
/// bound keeps `now + lease` a finite timestamp.
pub const MAX_LEASE_US: i64 = 365 * 86_400 * 1_000_000;

/// Lease lengths: positive and at most [`MAX_LEASE_US`] (months are
/// refused earlier, when the interval is converted).
pub fn check_lease_us(lease_us: i64) -> Result<i64, crate::error::Error> {
    if lease_us <= 0 {
        return Err(crate::error::Error::invalid(
            "lease must be a positive interval",
        ));
    }
    if lease_us > MAX_LEASE_US {
        return Err(crate::error::Error::invalid(
            "lease must be at most 365 days",
        ));
    }
    Ok(lease_us)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000_000_000;
    const FP_A: &[u8] = &[0xaa; 32];
    const FP_B: &[u8] = &[0xbb; 32];

    fn stored(state: State) -> Stored {
        Stored {
            state,
            attempt: 1,
            lease_expires_at: None,
            next_attempt_at: None,
            fingerprint: None,
        }
    }

    fn outcome(s: &Stored) -> Outcome {
        decide(Some(s), NOW, None).outcome
    }

    #[test]
    fn first_delivery_is_claimed() {
        assert_eq!(
            decide(None, NOW, None),
            Decision {
                outcome: Outcome::Claimed,
                write: Write::Insert
            }
        );
    }

    #[test]
    fn live_lease_is_in_progress_expired_is_reclaimed() {
        let mut s = stored(State::Processing);
        s.lease_expires_at = Some(NOW + 1);
        assert_eq!(
            decide(Some(&s), NOW, None),
            Decision {
                outcome: Outcome::InProgress,
                write: Write::Touch
            }
        );
        s.lease_expires_at = Some(NOW);
        assert_eq!(
            decide(Some(&s), NOW, None),
            Decision {
                outcome: Outcome::Reclaimed,
                write: Write::Lease { attempt: 2 }
            }
        );
    }

    #[test]
    fn terminal_and_parked_states_are_not_processed() {
        assert_eq!(outcome(&stored(State::Completed)), Outcome::Duplicate);
        assert_eq!(
            outcome(&stored(State::UnknownOutcome)),
            Outcome::UnknownOutcome
        );
        assert_eq!(outcome(&stored(State::DeadLettered)), Outcome::DeadLettered);
        for s in State::ALL {
            let d = decide(Some(&stored(s)), NOW, None);
            assert_eq!(
                d.outcome.grants_lease(),
                matches!(d.write, Write::Lease { .. }),
                "{s:?}"
            );
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
    fn pending_keys_are_claimed_by_the_first_claim() {
        let d = decide(Some(&stored(State::Pending)), NOW, None);
        assert_eq!(
            d,
            Decision {
                outcome: Outcome::Claimed,
                write: Write::Lease { attempt: 2 }
            }
        );
    }

    #[test]
    fn a_different_fingerprint_is_a_conflict_in_every_state() {
        for state in State::ALL {
            let mut s = stored(state);
            s.fingerprint = Some(FP_A.to_vec());
            assert_eq!(
                decide(Some(&s), NOW, Some(FP_B)).outcome,
                Outcome::Conflict,
                "{state:?}"
            );
            assert_ne!(
                decide(Some(&s), NOW, Some(FP_A)).outcome,
                Outcome::Conflict,
                "{state:?}"
            );
            // a delivery without payload is never a conflict
            assert_ne!(
                decide(Some(&s), NOW, None).outcome,
                Outcome::Conflict,
                "{state:?}"
            );
        }
        // a key stored without a fingerprint has nothing to conflict with
        assert_eq!(
            decide(Some(&stored(State::Completed)), NOW, Some(FP_B)).outcome,
            Outcome::Duplicate
        );
    }

    #[test]
    fn only_the_current_token_completes() {
        let token = [1u8; 16];
        let other = [2u8; 16];
        assert!(may_complete(State::Processing, Some(&token), &token));
        assert!(!may_complete(State::Processing, Some(&other), &token));
        assert!(!may_complete(State::Completed, Some(&token), &token));
        assert!(!may_complete(State::Pending, None, &token));
    }

    #[test]
    fn leases_are_positive_and_bounded() {
        assert!(check_lease_us(0).is_err());
        assert!(check_lease_us(-1).is_err());
        assert_eq!(check_lease_us(1).unwrap(), 1);
        assert_eq!(check_lease_us(MAX_LEASE_US).unwrap(), MAX_LEASE_US);
        assert_eq!(
            check_lease_us(MAX_LEASE_US + 1).unwrap_err().to_string(),
            "lease must be at most 365 days"
        );
    }

    #[test]
    fn state_names_round_trip() {
        for s in State::ALL {
            assert_eq!(State::parse(s.as_str()), Some(s));
        }
        assert_eq!(State::parse("done"), None);
    }
}

/// The advisory-lock id of a key: FNV-1a 64 over the source, a 0xff byte
/// (which never occurs in UTF-8, so `("ab","c")` and `("a","bc")` hash
/// different inputs) and the key. Every writer of a key takes this lock
/// for the rest of its transaction; two keys that share an id only
/// serialise each other, never merge.
pub fn lock_id(source: &str, idem_key: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in source.bytes().chain([0xff]).chain(idem_key.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod lock_tests {
    use super::lock_id;

    #[test]
    fn lock_ids_are_stable_and_delimited() {
        // FNV-1a is fixed by its definition; pin one value so a change of
        // the function (which would let old and new backends disagree
        // during an upgrade) fails here.
        assert_eq!(lock_id("", ""), 0xaf64_724c_8602_eb6e);
        assert_ne!(lock_id("ab", "c"), lock_id("a", "bc"));
        assert_eq!(lock_id("github", "k"), lock_id("github", "k"));
    }
}
