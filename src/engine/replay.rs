//! The replay guard's answer for a body already received under another
//! key (`crate::store::replay_guards`): where a source's event id is not
//! signed (or a provider's retries change it), a signed body seen again
//! under a new id is a replay, answered from the key it belongs to.

use super::Content;
use crate::answer::Mode;
use crate::claim::{Outcome, State};
use crate::jsonb::Jsonb;
use crate::spi::Conn;
use crate::store::replay_guards::{self, Guard};
use crate::store::{self, Key};
use crate::time::clock_now;

/// A replay the guard answered: the key the body belongs to, and what a
/// delivery of that key would be told.
pub struct Replayed {
    pub idem_key: String,
    pub outcome: Outcome,
    pub result: Option<Jsonb>,
}

/// The replay guard of `key`'s delivery of a body whose raw bytes hash to
/// `body_sha256` (`crate::store::replay_guards`): `None` when the body is
/// `key`'s to process (new, a redelivery of the same event id, or taken
/// over), else the answer of the key it belongs to.
///
/// The body is taken over from its key (the owner) when the owner is gone
/// (forgotten, expired), when the owner never took this content (the guard
/// was left by a delivery of the owner's id with other content: a
/// conflict), or when the owner failed and nothing retries it but the
/// provider (no payload: a claim-mode key), since then its side effect did
/// not happen and, if the owner was itself a replay, no retry would ever
/// come. Otherwise the owner answers: `duplicate` with its result when
/// completed; `in_progress` while processing, pending, or failed with a
/// payload (`webhook_next` retries it); `unknown_outcome`, `dead_lettered`;
/// in enqueue mode, `duplicate` for all of these. The guard row is locked
/// before the owner is read, so a redelivery of the owner that is
/// reclaiming it right now is waited for; except that an answer the
/// owner's committed state decides is first given from reads alone, the
/// guard and the owner read without a lock (a replay then takes
/// no transaction id), where a recent duplicate may be
/// ([`super::claim::duplicate_read_interval`]).
pub fn replay_guard(
    conn: &Conn<'_>,
    key: Key<'_>,
    body_sha256: &[u8],
    content: Content<'_>,
    mode: Mode,
) -> Option<Replayed> {
    let now = clock_now();
    // A round ends unless the guard row was pruned between its insert and
    // its read, which cannot keep happening; three rounds are plenty.
    for round in 0..3 {
        if replay_guards::insert(conn, key.source, body_sha256, key.idem_key, now) {
            return None;
        }
        // A replayed body whose answer the owner's committed state decides
        // is answered from reads alone, under the conditions of
        // a recent duplicate's read: the guard's locking read would take a
        // transaction id and write. Ordered before any change committing
        // meanwhile, as that read is; a body the delivery may take over
        // (answer None) takes the lock below, as before.
        if round == 0 && super::claim::duplicate_read_interval().is_some() {
            let owner = replay_guards::owner_unlocked(conn, key.source, body_sha256).filter(|o| o != key.idem_key);
            if let Some(owner) = owner {
                let found = replay_guards::owner(conn, key.source, &owner);
                if let Some((outcome, result)) = found.and_then(|o| replayed_answer(o, content, mode)) {
                    return Some(Replayed { idem_key: owner, outcome, result });
                }
            }
        }
        let owner = match replay_guards::lock(conn, key.source, body_sha256, key.idem_key) {
            Guard::Ours => return None,
            Guard::Gone => continue,
            Guard::Theirs(owner) => owner,
        };
        let found = replay_guards::owner(conn, key.source, &owner);
        match found.and_then(|o| replayed_answer(o, content, mode)) {
            Some((outcome, result)) => return Some(Replayed { idem_key: owner, outcome, result }),
            None if replay_guards::take_over(conn, key.source, body_sha256, key.idem_key, now) => return None,
            None => continue,
        }
    }
    store::serialization_failure()
}

/// The answer to a replayed body from its owner as read: `None` when the
/// delivery may take the body over (the owner took other content, or
/// failed without a payload to retry), else the owner's outcome for this
/// mode and its stored result when completed.
fn replayed_answer(o: replay_guards::Owner, content: Content<'_>, mode: Mode) -> Option<(Outcome, Option<Jsonb>)> {
    let took_it = o.fingerprint.as_deref().is_none_or(|f| content.given(Some(f)) == Some(f));
    let outcome = match (o.state, mode) {
        _ if !took_it => return None,
        (State::Failed, _) if !o.queued => return None,
        (_, Mode::Enqueue) | (State::Completed, Mode::Claim) => Outcome::Duplicate,
        (State::Processing | State::Pending | State::Failed, Mode::Claim) => Outcome::InProgress,
        (State::UnknownOutcome, Mode::Claim) => Outcome::UnknownOutcome,
        (State::DeadLettered, Mode::Claim) => Outcome::DeadLettered,
    };
    let result = if o.state == State::Completed { o.result } else { None };
    Some((outcome, result))
}
