//! The HTTP answer to a delivery, as data: one pure function of what
//! happened to it (its [`Kind`]: a claim or enqueue outcome, a refusal, or
//! what became of the work), the [`Mode`] of the call and the provider's
//! [`Profile`]. `webhook_receive` returns it with every row (`http_status`,
//! `http_headers`, `response`) and `webhook_dedup.http_answer` gives it for
//! the answers a receiver reaches after its own work (the lease lost, a
//! database error), so that a receiver in any language answers with those
//! three values and decides nothing itself.
//!
//! The rules, and where each comes from (docs/providers.md has the table
//! per provider, `webhook_dedup.providers` the same as rows):
//!
//! - **A duplicate is answered 2xx, never 409.** Several senders drop a
//!   4xx without retrying it (HubSpot workflows every 4xx but 429,
//!   SendGrid Inbound Parse every 3xx and 4xx, Mailgun a 406), and every
//!   non-2xx counts toward disabling the endpoint (Stripe, Shopify, Svix,
//!   Intercom, Twitch): [`crate::profile::Profile::retries_4xx`] and
//!   `disable_rule` cite them. A 409 to such a sender, followed by a crash
//!   of the lease holder, loses the event.
//! - **5xx only when a retry is wanted and can help**: `in_progress` (the
//!   holder did not finish within the bounded wait) and `retry_later`, each
//!   with `Retry-After` (the real remaining time: the holder's lease, the
//!   backoff), and a lease lost after the work (another worker holds the
//!   key now). Always 503, never 429: no provider's document treats a 5xx
//!   worse than a 429, and two treat a 429 worse (SendGrid's Inbound Parse
//!   retries only 5xx and drops a 4xx, 429 included; Svix's open-source
//!   server delays a 429 by 60 s at least), while Typeform retries a 503
//!   every 2 to 3 minutes for 10 hours but a 500 only five times.
//! - **A conflict is parked, answered 200**: its bytes are deterministic,
//!   so every retry would conflict again; a 422 only buys days of retries
//!   and a step toward a disabled endpoint. The conflicting payload stays
//!   in `webhook_dedup.conflicts` for an operator. The same for
//!   `unknown_outcome` and `dead_lettered` (parked for `webhook_resolve`).
//!   A 200 stops every provider's retries, so no stop signal goes with it
//!   (Svix documents that `webhook-delivery: abort-message` "has no effect
//!   when ... delivery is considered successful"; Slack's header is for a
//!   "non-200 OK response").
//! - **4xx only for what no retry can fix**: 401 for a signature that does
//!   not verify (Discord's security checks expect exactly 401 and remove
//!   the endpoint otherwise; no stop signal: a retry verifies once the
//!   right key is added), 400 for a delivery without an event id, one
//!   whose id, type or time header was sent twice (which value is the
//!   provider's cannot be told), or a refused handshake, with the
//!   provider's stop signal where it has one (Mailgun's 406 in place of
//!   the 400; Slack's `X-Slack-No-Retry: 1`; Svix's `webhook-delivery:
//!   abort-message`).
//! - **200, not another 2xx**: Mailgun, Paddle, Linear, X and Intercom
//!   document 200 as success (Mailgun retries a 201 or 204), Zoom 200 or
//!   204, so every success answer here is 200.
//! - 500 for a database error (the receiver's own catch: it cannot ask
//!   the database then), which every provider retries.
//!
//! Every answer is JSON (`Content-Type: application/json`).

use crate::claim::Outcome;
use crate::error::Error;
use crate::profile::{Profile, StopSignal};

/// What a call was asked to do with a verified delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Claim it (claim-and-process receivers).
    Claim,
    /// Store it for `webhook_next` (persist-then-process receivers).
    Enqueue,
}

impl Mode {
    pub fn parse(text: &str) -> Result<Mode, Error> {
        match text {
            "claim" => Ok(Mode::Claim),
            "enqueue" => Ok(Mode::Enqueue),
            other => Err(Error::invalid(format!("mode must be claim or enqueue, not \"{other}\""))),
        }
    }
}

/// What happened to a delivery, as far as its answer depends on it: the
/// `outcome` column's values, the refusals (`verified = false`,
/// `reject_reason`), and what became of the receiver's own work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An outcome of a claim (`webhook_claim`, `webhook_receive`); of an
    /// enqueue only `duplicate`, `conflict` and `in_progress` (its writes
    /// met a lock held past the call's wait). `claimed` and `reclaimed`
    /// are answered once the caller's work committed.
    Claim(Outcome),
    /// Enqueued for `webhook_next`.
    Accepted,
    /// A provider's control message, answered by `webhook_receive`.
    Handshake,
    /// An event type the source does not accept.
    Ignored,
    /// The signature did not verify (any `reject_reason` of a signature,
    /// `token_reused` included).
    Rejected,
    /// Verified, but without an event id to key it on.
    MissingEventId,
    /// Verified, but a header its event id, type or time is read from was
    /// sent more than once (`crate::profile::RepeatedHeader`).
    RepeatedHeader,
    /// A handshake answer refused as unsafe (`refused_handshake`).
    RefusedHandshake,
    /// The work committed (`webhook_complete` returned true).
    Completed,
    /// `webhook_complete` or `webhook_checkpoint` returned false: another
    /// worker reclaimed the key, and the work was rolled back.
    LeaseLost,
    /// The database could not be asked (the receiver's catch).
    Error,
}

/// The kinds that are not claim outcomes.
const OTHERS: [Kind; 10] = [
    Kind::Accepted,
    Kind::Handshake,
    Kind::Ignored,
    Kind::Rejected,
    Kind::MissingEventId,
    Kind::RepeatedHeader,
    Kind::RefusedHandshake,
    Kind::Completed,
    Kind::LeaseLost,
    Kind::Error,
];

impl Kind {
    /// Every kind: the claim outcomes, then the others.
    pub fn all() -> impl Iterator<Item = Kind> {
        Outcome::ALL.into_iter().map(Kind::Claim).chain(OTHERS)
    }

    /// The name `webhook_dedup.http_answer(outcome => ...)` takes: the
    /// outcome's own name, `rejected`, `missing_event_id`, `repeated_header`,
    /// `refused_handshake`, `completed`, `lease_lost` or `error`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Claim(outcome) => outcome.as_str(),
            Kind::Accepted => "accepted",
            Kind::Handshake => "handshake",
            Kind::Ignored => "ignored",
            Kind::Rejected => "rejected",
            Kind::MissingEventId => "missing_event_id",
            Kind::RepeatedHeader => "repeated_header",
            Kind::RefusedHandshake => "refused_handshake",
            Kind::Completed => "completed",
            Kind::LeaseLost => "lease_lost",
            Kind::Error => "error",
        }
    }

    pub fn parse(text: &str) -> Result<Kind, Error> {
        Kind::all().find(|k| k.name() == text).ok_or_else(|| {
            let names: Vec<&str> = Kind::all().map(Kind::name).collect();
            Error::invalid(format!("unknown outcome \"{text}\": one of {}", names.join(", ")))
        })
    }

    /// Whether a call in `mode` can end in this kind: the claim outcomes
    /// only when claiming, but for an enqueue's duplicate, conflict and
    /// in_progress (`webhook_receive` bounds every lock wait by its
    /// `wait`); `accepted` only when enqueueing.
    pub fn in_mode(self, mode: Mode) -> bool {
        match self {
            Kind::Claim(Outcome::Duplicate | Outcome::Conflict | Outcome::InProgress) => true,
            Kind::Claim(_) | Kind::Completed | Kind::LeaseLost => mode == Mode::Claim,
            Kind::Accepted => mode == Mode::Enqueue,
            _ => true,
        }
    }
}

/// The body to answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// The stored result (a duplicate's, a parked key's none) or, after
    /// the work, the caller's own result; `{"status": <kind>}` when there
    /// is none.
    Result,
    /// `{"status": <kind>}`.
    Status,
    /// `{"error": <text>}`.
    Error(&'static str),
    /// The handshake's own answer (`response` as `webhook_receive` made it).
    Handshake,
}

/// An HTTP answer: status, headers (names as sent), body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Body,
}

/// The status of every success answer (see the module documentation).
pub const OK: u16 = 200;
/// The status of a busy answer (see the module documentation).
pub const SERVICE_UNAVAILABLE: u16 = 503;

/// The answer to a delivery of `kind` in `mode`, for `profile`'s provider
/// (`None`: a scheme without a profile, `hmac`), with `retry_after_s`
/// seconds until a retry can succeed where it is known (in_progress: the
/// holder's remaining lease; retry_later: the remaining backoff), sent as
/// `Retry-After` (at least 1) on a busy answer. 22023 for a kind the mode
/// never ends in.
pub fn reply(kind: Kind, mode: Mode, profile: Option<&Profile>, retry_after_s: Option<i64>) -> Result<Reply, Error> {
    if !kind.in_mode(mode) {
        return Err(Error::invalid(format!(
            "outcome {} does not happen in mode {}",
            kind.name(),
            match mode {
                Mode::Claim => "claim",
                Mode::Enqueue => "enqueue",
            }
        )));
    }
    let stop = profile.and_then(|p| p.stop_signal);
    let mut headers = vec![("Content-Type", "application/json".to_string())];
    let stop_header = |headers: &mut Vec<(&'static str, String)>| {
        if let Some(StopSignal::Header(name, value)) = stop {
            headers.push((name, value.to_string()));
        }
    };
    let (status, body) = match kind {
        Kind::Claim(Outcome::Claimed | Outcome::Reclaimed | Outcome::Duplicate) | Kind::Completed => (OK, Body::Result),
        Kind::Accepted | Kind::Ignored => (OK, Body::Status),
        Kind::Handshake => (OK, Body::Handshake),
        Kind::Claim(Outcome::Conflict | Outcome::UnknownOutcome | Outcome::DeadLettered) => (OK, Body::Status),
        Kind::Claim(Outcome::InProgress | Outcome::RetryLater) | Kind::LeaseLost => {
            if let Some(seconds) = retry_after_s {
                headers.push(("Retry-After", seconds.max(1).to_string()));
            }
            (SERVICE_UNAVAILABLE, Body::Status)
        }
        Kind::Rejected => (401, Body::Error("invalid signature")),
        Kind::MissingEventId | Kind::RepeatedHeader | Kind::RefusedHandshake => {
            stop_header(&mut headers);
            let status = match stop {
                Some(StopSignal::Status(code)) => code,
                _ => 400,
            };
            let text = match kind {
                Kind::MissingEventId => "no event id",
                Kind::RepeatedHeader => "repeated header",
                _ => "refused handshake",
            };
            (status, Body::Error(text))
        }
        Kind::Error => (500, Body::Error("internal error")),
    };
    Ok(Reply { status, headers, body })
}

/// Seconds from `now_us` until `at_us` (microseconds), rounded up: what a
/// `Retry-After` says; `None` without a time.
pub fn seconds_until(at_us: Option<i64>, now_us: i64) -> Option<i64> {
    at_us.map(|at| at.saturating_sub(now_us).max(0).saturating_add(999_999) / 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{profile, PROFILES};
    use crate::signature::Scheme;

    fn header<'a>(r: &'a Reply, name: &str) -> Option<&'a str> {
        r.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    /// No kind, in any mode, for any provider (or none), is answered 409
    /// or 422; every answer is JSON; success is always 200.
    #[test]
    fn every_combination_is_answered_without_409_or_422() {
        let profiles: Vec<Option<&Profile>> = std::iter::once(None).chain(PROFILES.iter().map(Some)).collect();
        let mut answered = 0;
        for kind in Kind::all() {
            for mode in [Mode::Claim, Mode::Enqueue] {
                for p in &profiles {
                    for retry_after in [None, Some(0), Some(7)] {
                        let r = reply(kind, mode, *p, retry_after);
                        if !kind.in_mode(mode) {
                            assert!(r.is_err(), "{kind:?} in {mode:?}");
                            continue;
                        }
                        let r = r.unwrap();
                        answered += 1;
                        assert!(![409, 422].contains(&r.status), "{kind:?} {mode:?} {:?}", p.map(|p| p.scheme));
                        assert_eq!(header(&r, "Content-Type"), Some("application/json"));
                        if (200..300).contains(&r.status) {
                            assert_eq!(r.status, 200, "{kind:?}");
                        }
                    }
                }
            }
        }
        assert!(answered > 18 * 20, "{answered}");
        assert_eq!(Kind::all().count(), 18);
    }

    /// The mapping, kind by kind, for a provider without a stop signal.
    #[test]
    fn the_mapping() {
        let github = profile(Scheme::Github);
        let at = |kind, retry| reply(kind, Mode::Claim, github, retry).unwrap();
        let dup = at(Kind::Claim(Outcome::Duplicate), None);
        assert_eq!((dup.status, dup.body), (200, Body::Result));
        assert_eq!(
            (at(Kind::Claim(Outcome::Claimed), None).status, at(Kind::Completed, None).body),
            (200, Body::Result)
        );
        let busy = at(Kind::Claim(Outcome::InProgress), Some(12));
        assert_eq!((busy.status, header(&busy, "Retry-After")), (503, Some("12")));
        let later = at(Kind::Claim(Outcome::RetryLater), Some(0));
        assert_eq!((later.status, header(&later, "Retry-After")), (503, Some("1")), "at least 1 s");
        let lost = at(Kind::LeaseLost, None);
        assert_eq!((lost.status, header(&lost, "Retry-After")), (503, None), "no time known, no header");
        for parked in [Outcome::Conflict, Outcome::UnknownOutcome, Outcome::DeadLettered].map(Kind::Claim) {
            assert_eq!((at(parked, None).status, at(parked, None).body), (200, Body::Status), "{parked:?}");
        }
        assert_eq!(at(Kind::Rejected, None).status, 401);
        assert_eq!(at(Kind::MissingEventId, None).status, 400);
        assert_eq!(at(Kind::RefusedHandshake, None).status, 400);
        assert_eq!(at(Kind::Handshake, None).body, Body::Handshake);
        assert_eq!(at(Kind::Ignored, None).status, 200);
        assert_eq!(at(Kind::Error, None).status, 500);
        let enqueued = reply(Kind::Accepted, Mode::Enqueue, github, None).unwrap();
        assert_eq!((enqueued.status, enqueued.body), (200, Body::Status));
        assert!(reply(Kind::Claim(Outcome::Claimed), Mode::Enqueue, github, None).is_err());
        let busy = reply(Kind::Claim(Outcome::InProgress), Mode::Enqueue, github, Some(4)).unwrap();
        assert_eq!((busy.status, header(&busy, "Retry-After")), (503, Some("4")), "a lock held past the wait");
        assert_eq!(at(Kind::RepeatedHeader, None).status, 400);
        assert!(reply(Kind::Claim(Outcome::Conflict), Mode::Enqueue, github, None).is_ok());
        assert!(reply(Kind::Accepted, Mode::Claim, github, None).is_err());
        assert_eq!(dup.headers.len(), 1, "Content-Type only");
    }

    /// A provider's stop signal goes with the final refusals (400), never
    /// with a 200 (which stops retries by itself, and where Svix ignores
    /// its header), a busy answer (a retry is wanted) nor a bad signature
    /// (a retry verifies once the right key is added).
    #[test]
    fn stop_signals_go_with_final_refusals_only() {
        let with_signal: Vec<_> = PROFILES.iter().filter(|p| p.stop_signal.is_some()).collect();
        assert_eq!(with_signal.len(), 3, "Slack, Standard Webhooks (Svix), Mailgun");
        for p in with_signal {
            let at = |kind| reply(kind, Mode::Claim, Some(p), Some(5)).unwrap();
            match p.stop_signal.unwrap() {
                StopSignal::Header(name, value) => {
                    for kind in [Kind::MissingEventId, Kind::RepeatedHeader, Kind::RefusedHandshake] {
                        assert_eq!(header(&at(kind), name), Some(value), "{:?} {kind:?}", p.scheme);
                        assert_eq!(at(kind).status, 400);
                    }
                    let others = [Outcome::Conflict, Outcome::UnknownOutcome, Outcome::InProgress, Outcome::RetryLater]
                        .map(Kind::Claim)
                        .into_iter()
                        .chain([Kind::Rejected, Kind::Claim(Outcome::Duplicate), Kind::Error]);
                    for kind in others {
                        assert_eq!(header(&at(kind), name), None, "{:?} {kind:?}", p.scheme);
                    }
                }
                StopSignal::Status(code) => {
                    assert_eq!(at(Kind::MissingEventId).status, code, "{:?}", p.scheme);
                    assert_eq!(at(Kind::Claim(Outcome::Conflict)).status, 200, "a 2xx already stops retries");
                    assert_eq!(at(Kind::Rejected).status, 401);
                }
            }
        }
    }

    #[test]
    fn busy_answers_are_503_with_retry_after_for_every_provider() {
        for p in PROFILES.iter().map(Some).chain([None]) {
            let r = reply(Kind::Claim(Outcome::InProgress), Mode::Claim, p, Some(3)).unwrap();
            assert_eq!((r.status, header(&r, "Retry-After")), (503, Some("3")));
        }
    }

    #[test]
    fn kinds_round_trip_their_names() {
        for kind in Kind::all() {
            assert_eq!(Kind::parse(kind.name()).unwrap(), kind);
        }
        assert!(Kind::parse("processing").is_err());
        assert_eq!(Mode::parse("enqueue").unwrap(), Mode::Enqueue);
        assert!(Mode::parse("Claim").is_err());
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(seconds_until(Some(2_500_000), 1_000_000), Some(2));
        assert_eq!(seconds_until(Some(2_000_000), 1_000_000), Some(1));
        assert_eq!(seconds_until(Some(0), 1_000_000), Some(0), "in the past: 0 (sent as 1)");
        assert_eq!(seconds_until(None, 0), None);
        assert_eq!(seconds_until(Some(i64::MAX), 0), Some(i64::MAX / 1_000_000), "no overflow");
    }
}
