//! `webhook_receive`'s pipeline: one [`Intake`] per delivery, built once
//! (the converted arguments, the source's settings, its keys, the
//! deadlines) and passed by reference through each stage:
//!
//! 1. [`verify`]: X's unsigned CRC, the signature, a signed token bound to
//!    its bytes (Mailgun), a signed handshake;
//! 2. [`extract`]: the event id, type and time by the profile and the
//!    source's settings, the accepted event types, the key and the content;
//! 3. [`store`]: within the call's deadline ([`super::bound`]), the wait
//!    for a holder, a recent duplicate answered from reads, the replay
//!    guard, the claim or enqueue, the archive.
//!
//! A stage that ends the intake returns the [`Answer`]; outcomes stay
//! enums until `crate::api` builds the row. The rules and their sources
//! are in `crate::api::receive`'s documentation of `webhook_receive`.

// A stage's Err is the call's one answer, returned once: no box.
#![allow(clippy::result_large_err)]

use super::bound::{within, Bound};
use super::claim::{self, Claim, ClaimRow};
use super::queue::{self, Enqueue, Origin};
use super::replay::replay_guard;
use super::Content;
use crate::answer::{Kind, Mode};
use crate::claim::Outcome;
use crate::error::{Error, OrRaise, Raise};
use crate::handshake;
use crate::jsonb::Jsonb;
use crate::key::{body_hash_field, derive, Parts};
use crate::metrics::{self, Counter};
use crate::profile::{self, Body, Extracted, Fingerprint, Rules};
use crate::signature::{self, Config, Delivery, Headers, HmacSpec, Reason, Scheme, Verdict};
use crate::spi::Conn;
use crate::store::archive::Archived;
use crate::store::replay_guards;
use crate::store::secrets::StoredSecret;
use crate::store::signature_tokens::{self, Binding, Signed};
use crate::store::sources::SourceSettings;
use crate::store::{self, sources, Key};
use crate::time::{clock_now, unix_micros};
use pgrx::pg_sys;
use pgrx::Uuid;

/// What `webhook_receive` was called with, converted and checked by the
/// SQL surface (times in microseconds since 2000).
pub struct Request<'a> {
    pub scheme: Scheme,
    pub body: &'a [u8],
    pub headers: Headers,
    /// The headers as given, for the archive.
    pub given_headers: Option<Jsonb>,
    /// The secrets given (None: the source's keys in
    /// `webhook_dedup.source_secrets`).
    pub secrets: Option<Vec<Option<&'a str>>>,
    /// The source (the scheme's name when the call gives none), checked.
    pub source: &'a str,
    pub environment: Option<&'a str>,
    pub account: Option<&'a str>,
    pub operation: Option<&'a str>,
    pub mode: Mode,
    pub lease_us: Option<i64>,
    pub body_key_fallback: bool,
    /// The replay window given (None: the source's, else the scheme's).
    pub tolerance_us: Option<i64>,
    /// The verifier's clock.
    pub at_us: i64,
    pub url: Option<&'a str>,
    pub method: Option<&'a str>,
    /// The generic scheme's header description (scheme `hmac` only).
    pub hmac: Option<HmacSpec>,
    /// The longest wait for a holder (None: the profile's default).
    pub wait_us: Option<i64>,
}

/// One delivery's intake: the request, and what is read or decided once
/// for every stage.
pub struct Intake<'a> {
    pub request: Request<'a>,
    /// The source's settings, read once.
    pub settings: SourceSettings,
    /// The source's stored keys valid now for the scheme (only when the
    /// call gives no secrets).
    stored: Option<Vec<StoredSecret>>,
    /// The secrets to verify with, in order, checked.
    secrets: Vec<&'a str>,
    /// What each secret is called in `secret_index` (its position, or its
    /// key id).
    ids: Vec<i32>,
    /// The replay window: the call's, else the source's (None: the
    /// scheme's default).
    tolerance_us: Option<i64>,
    /// The URL the scheme signs (Twilio, Square, HubSpot; X's receivers
    /// pass theirs for the CRC only).
    signed_url: Option<&'a str>,
    /// When every lock wait of the call ends.
    lock_deadline: i64,
    /// How long a delivery waits for a holder (0 where it cannot help).
    wait_us: i64,
}

/// Why a delivery was refused (`reject_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// The signature did not verify.
    Signature(Reason),
    /// A signature block copied onto another body
    /// (`crate::store::signature_tokens`).
    TokenReused,
    /// Verified, but without an event id to key it on.
    MissingEventId,
    /// Verified, but a header the id, type or time is read from was sent
    /// more than once (docs/signatures.md, "Repeated headers").
    RepeatedHeader,
    /// A handshake answer refused as unsafe.
    RefusedHandshake,
}

impl Rejection {
    /// Its `reject_reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Rejection::Signature(reason) => reason.as_str(),
            Rejection::TokenReused => TOKEN_REUSED,
            Rejection::MissingEventId => "missing_event_id",
            Rejection::RepeatedHeader => "repeated_header",
            Rejection::RefusedHandshake => "refused_handshake",
        }
    }

    fn kind(self) -> Kind {
        match self {
            Rejection::Signature(_) | Rejection::TokenReused => Kind::Rejected,
            Rejection::MissingEventId => Kind::MissingEventId,
            Rejection::RepeatedHeader => Kind::RepeatedHeader,
            Rejection::RefusedHandshake => Kind::RefusedHandshake,
        }
    }
}

/// `reject_reason` of a delivery whose signature verified but whose signed
/// token was first seen with other content (a signature block copied onto
/// another body: `crate::store::signature_tokens`).
pub const TOKEN_REUSED: &str = "token_reused";

/// What `webhook_receive` answers: the columns of
/// `webhook_dedup.receive_result` before the HTTP answer (times in
/// microseconds since 2000).
#[derive(Default, Clone)]
pub struct Answer {
    pub verified: bool,
    pub rejection: Option<Rejection>,
    pub idem_key: Option<String>,
    /// A claim's, an enqueue's, `handshake` or `ignored` (None when
    /// rejected).
    pub outcome: Option<Kind>,
    pub claim_token: Option<Uuid>,
    pub attempt: Option<i32>,
    pub result: Option<Jsonb>,
    pub event_type: Option<String>,
    pub event_time: Option<i64>,
    pub last_step: Option<String>,
    /// A handshake's body.
    pub response: Option<Jsonb>,
    pub secret_index: Option<i32>,
    /// When a retry could succeed (`Retry-After`).
    pub retry_at: Option<i64>,
}

impl Answer {
    /// What happened, as the HTTP answer knows it.
    pub fn kind(&self) -> Kind {
        self.rejection.map(Rejection::kind).or(self.outcome).expect("every answer has an outcome or a reject reason")
    }

    fn rejected(rejection: Rejection) -> Answer {
        Answer { rejection: Some(rejection), ..Answer::default() }
    }
}

/// The whole intake of one delivery (`webhook_receive`), in the caller's
/// SPI connection.
pub fn receive<'a>(conn: &Conn<'_>, request: Request<'a>) -> Answer {
    let intake = Intake::new(conn, request);
    let verified = match verify(conn, &intake) {
        Ok(verified) => verified,
        Err(answer) => return answer,
    };
    match extract(&intake, &verified) {
        Ok(delivery) => store(conn, &intake, &delivery),
        Err(answer) => answer,
    }
}

impl<'a> Intake<'a> {
    /// The intake of `request`: the source's settings and (without given
    /// secrets) its keys, read once; the secrets checked; the deadlines.
    fn new(conn: &Conn<'_>, request: Request<'a>) -> Intake<'a> {
        let scheme = request.scheme;
        let settings = sources::settings(conn, request.source);
        let stored = request.secrets.is_none().then(|| stored_keys(conn, scheme, request.source, request.at_us));
        // the given secrets checked once; stored keys were checked as keys
        // of the scheme when read (stored_keys)
        let secrets = match &request.secrets {
            Some(list) => signature::check_secrets(list).or_raise(),
            None => Vec::new(),
        };
        let ids = match (&request.secrets, &stored) {
            (Some(list), _) => (1..=list.len() as i32).collect(),
            (None, keys) => keys.iter().flatten().map(|k| k.id).collect(),
        };
        let budget_us = request.wait_us.unwrap_or_else(|| profile::default_wait_ms(profile::profile(scheme)) * 1_000);
        // Every lock wait of the call ends by then (super::bound).
        let lock_deadline = clock_now().saturating_add(budget_us);
        // No wait for a holder where it cannot help (crate::wait): a
        // transaction that wrote before this call may hold the key's row
        // lock itself, and one that reads a single snapshot could not see
        // the holder's completion (its claim would end in 40001).
        let wait_us = if store::transaction_snapshot() || transaction_wrote() { 0 } else { budget_us };
        let tolerance_us = request
            .tolerance_us
            .or_else(|| settings.tolerance.map(|t| crate::time::duration_us(t, "tolerance").or_raise()));
        let signed_url = if scheme == Scheme::Twitter { None } else { request.url };
        Intake { settings, stored, secrets, ids, tolerance_us, signed_url, lock_deadline, wait_us, request }
    }

    /// The secrets to verify with, in order, checked: the given ones, or
    /// the source's stored keys.
    fn secrets(&self) -> Vec<&str> {
        match &self.stored {
            Some(keys) => keys.iter().map(|k| k.secret.as_str()).collect(),
            None => self.secrets.clone(),
        }
    }

    fn count(&self, event_type: Option<&str>, counter: Counter, delivery: bool) {
        metrics::count(self.request.source, event_type, counter, delivery);
    }

    /// The lease this delivery's claim asks for, microseconds: the call's
    /// `lease`, else the source's. What an answer of `in_progress` tells
    /// the provider to wait when no holder's lease can be read yet (a first
    /// claim still in its open transaction, made by a copy of this same
    /// receiver, which asks for the same lease).
    fn lease_us(&self) -> i64 {
        self.request.lease_us.unwrap_or_else(|| self.settings.default_lease_us())
    }
}

/// A delivery whose signature verified.
struct Verified<'a> {
    /// What its secret is called (`secret_index`).
    secret_index: Option<i32>,
    /// The body, read as JSON on demand.
    json: Body<'a>,
}

/// Stage 1: X's unsigned CRC, the signature, a signed token bound to its
/// bytes, a signed handshake. `Err`: the answer that ends the intake.
fn verify<'a>(conn: &Conn<'_>, intake: &Intake<'a>) -> Result<Verified<'a>, Answer> {
    let r = &intake.request;
    let scheme = r.scheme;
    let secrets = intake.secrets();
    // X's CRC is unsigned: answered (or refused) before verification, with
    // the current secret (the first given, or the newest key); nothing is
    // read or written.
    if scheme == Scheme::Twitter {
        let current = if r.secrets.is_some() { secrets[0] } else { secrets[secrets.len() - 1] };
        let key = signature::secret_key(scheme, current).or_raise();
        if let Some(handshake) = handshake::unsigned(scheme, r.body, r.url, &key) {
            // Stored keys answer only for a source meant for X (its
            // provider, else its name, is twitter) and with a key that
            // add_secret accepted for X: the answer is a MAC of
            // caller-chosen text, and under another provider's key (a
            // Mailgun key signs "{timestamp}{token}") it would be a valid
            // signature of that provider. The provider can change after the
            // keys were added; what a key was accepted for cannot.
            let provider = intake.settings.provider.as_deref().unwrap_or(r.source);
            let accepted_for_x = intake
                .stored
                .as_ref()
                .and_then(|keys| keys.last())
                .is_some_and(|k| k.scheme.as_deref() == Some(Scheme::Twitter.name()));
            if r.secrets.is_none() && (Scheme::parse(provider).ok() != Some(Scheme::Twitter) || !accepted_for_x) {
                return Err(handshake_answer(handshake::Answer::Refused("not a twitter source"), false));
            }
            return Err(handshake_answer(handshake, false));
        }
    }

    let config = Config {
        secrets: secrets.clone(),
        tolerance_us: intake.tolerance_us,
        now_us: unix_micros(r.at_us),
        hmac: r.hmac.clone(),
    };
    let delivery = Delivery { body: r.body, headers: &r.headers, url: intake.signed_url, method: r.method };
    let verdict: Verdict = signature::verify(scheme, delivery, &config).or_raise();
    if !verdict.valid() {
        if let Some(counter) = Counter::for_rejection(verdict.reason) {
            intake.count(None, counter, false);
        }
        return Err(Answer::rejected(Rejection::Signature(verdict.reason)));
    }
    let secret_index = verdict.secret_index.and_then(|i| intake.ids.get(i).copied());

    // A signature that covers nothing of the body (Mailgun) is bound to the
    // bytes its token first arrived with: the same token on other content
    // is a copied signature block.
    if let Some(token) = signature::signed_token(scheme, r.body) {
        bind_token(conn, intake, &verdict, &token, secret_index)?;
    }

    let json = Body::new(r.body);
    if let Some(secret) = verdict.secret_index.and_then(|i| secrets.get(i).copied()) {
        let key = signature::keys(scheme, &[secret]).or_raise().remove(0);
        // Discord's PING answer uses no key; a public key has no MAC.
        if let Some(handshake) = handshake::answer(scheme, &json, key.mac().unwrap_or_default()) {
            return Err(Answer { secret_index, ..handshake_answer(handshake, true) });
        }
    }
    Ok(Verified { secret_index, json })
}

/// A signed token (Mailgun's) bound to the bytes it first arrived with
/// (`crate::store::signature_tokens`), within the call's deadline. `Err`:
/// refused as too old or reused, or answered `in_progress` when another
/// copy binding it is still open at the deadline.
fn bind_token(
    conn: &Conn<'_>,
    intake: &Intake<'_>,
    verdict: &Verdict,
    token: &str,
    secret_index: Option<i32>,
) -> Result<(), Answer> {
    let r = &intake.request;
    let signed_at =
        verdict.signed_at.map_or(r.at_us, |t| (t - crate::calendar::PG_EPOCH_UNIX_S).saturating_mul(1_000_000));
    let tolerance_us = intake.tolerance_us.or(r.scheme.default_tolerance_s().map(|s| s * 1_000_000)).unwrap_or(0);
    // A token is remembered while its signed time is within the source's
    // retention: an older signature cannot be checked against a token that
    // may have been pruned, so it is refused as too old, whatever the
    // window (only a tolerance wider than the retention lets one verify).
    if signed_at < r.at_us.saturating_sub(intake.settings.retention_us()) {
        intake.count(None, Counter::RejectedTimestampTooOld, false);
        return Err(Answer::rejected(Rejection::Signature(Reason::TimestampTooOld)));
    }
    let signed = Signed { at: signed_at, window_until: signed_at.saturating_add(tolerance_us) };
    let token_hash = Fingerprint::raw(token.as_bytes());
    let body_hash = Fingerprint::raw(r.body);
    // the bind waits for another copy binding the same token in a
    // transaction still open: bounded as the rest of the call
    let bound = within(intake.lock_deadline, |_| {
        signature_tokens::bind(conn, r.source, token_hash.as_bytes(), body_hash.as_bytes(), signed, clock_now())
    });
    match bound {
        Some(Binding::Other) => {
            intake.count(None, Counter::RejectedTokenReused, false);
            Err(Answer { secret_index, ..Answer::rejected(Rejection::TokenReused) })
        }
        Some(_) => Ok(()),
        None => {
            intake.count(None, Counter::for_outcome(Outcome::InProgress), true);
            Err(Answer {
                verified: true,
                secret_index,
                outcome: Some(Kind::Claim(Outcome::InProgress)),
                retry_at: Some(clock_now().saturating_add(intake.lease_us())),
                ..Answer::default()
            })
        }
    }
}

/// A verified delivery as read by the profile and the source's settings.
struct Keyed {
    /// The columns every later answer carries (verified, secret, event
    /// type and time).
    read: Answer,
    /// Whether the replay guard is on for it (the profile's, or the
    /// source's `replay_guard`).
    replay_guard: bool,
    /// The provider's event id (None: a body key).
    event_id: Option<String>,
    /// The idempotency key.
    key: String,
    event_type: Option<String>,
    /// Its fingerprint under the source's rule.
    fingerprint: Fingerprint,
    /// Of the raw bytes, when the rule covers less.
    raw: Option<Fingerprint>,
    /// What the replay guard keys on: what the signature covers (the raw
    /// bytes, or the canonical signed text).
    signed: Fingerprint,
}

impl Keyed {
    fn content(&self) -> Content<'_> {
        Content { fingerprint: Some(self.fingerprint.as_bytes()), raw: self.raw.as_ref().map(Fingerprint::as_bytes) }
    }

    fn key<'a>(&'a self, intake: &'a Intake<'_>) -> Key<'a> {
        Key { source: intake.request.source, idem_key: &self.key }
    }
}

/// Stage 2: the event id, type and time, the accepted event types, the key
/// and the content. `Err`: the answer that ends the intake (ignored,
/// missing event id, repeated header).
fn extract(intake: &Intake<'_>, verified: &Verified<'_>) -> Result<Keyed, Answer> {
    let r = &intake.request;
    let scheme = r.scheme;
    let source_intake = intake.settings.intake();
    let rules = match source_intake {
        Some(source_intake) => source_intake.apply(Rules::of(scheme), scheme),
        None => Rules::of(scheme),
    };
    let secret_index = verified.secret_index;
    let Extracted { event_id, event_type, event_time } = match profile::extract(&rules, &r.headers, &verified.json) {
        Ok(extracted) => extracted,
        // which of the values is the provider's cannot be told: refused
        // like a delivery without an id, nothing written
        Err(profile::RepeatedHeader { .. }) => {
            intake.count(None, Counter::MissingEventIds, false);
            return Err(Answer { verified: true, secret_index, ..Answer::rejected(Rejection::RepeatedHeader) });
        }
    };
    let read = Answer { verified: true, secret_index, event_time, event_type: event_type.clone(), ..Answer::default() };
    if source_intake.is_some_and(|i| !i.accepts(event_type.as_deref())) {
        intake.count(event_type.as_deref(), Counter::Ignored, false);
        return Err(Answer { outcome: Some(Kind::Ignored), ..read });
    }
    let (id, body_hash) = match &event_id {
        Some(id) => (id.clone(), false),
        None if r.body_key_fallback || rules.body_key => (body_hash_field(r.body), true),
        None => {
            intake.count(event_type.as_deref(), Counter::MissingEventIds, false);
            return Err(Answer { rejection: Some(Rejection::MissingEventId), ..read });
        }
    };
    let parts = Parts {
        source: r.source,
        event_id: &id,
        environment: r.environment,
        account: r.account,
        operation: r.operation,
        body_hash,
    };
    let key = derive(&parts).or_raise();
    // A scheme that signs the content but not the bytes (Twilio's sorted
    // form parameters) is identified by its canonical signed text
    // (FingerprintRule::SignedText, unless the source configured its own
    // rule): re-ordered or re-encoded form pairs are the same signed
    // request.
    let signed_text = signature::signed_content(scheme, r.body, intake.signed_url);
    let fingerprint = rules.fingerprint.fingerprint_signed(&verified.json, signed_text.as_deref());
    // The raw bytes' fingerprint too when the rule covers less: a key
    // stored under another rule still knows its own bytes
    // (crate::claim::same_bytes).
    let raw_bytes = if fingerprint.is_raw() { fingerprint } else { Fingerprint::raw(r.body) };
    let raw = (!fingerprint.is_raw()).then_some(raw_bytes);
    let signed = signed_text.as_deref().map_or(raw_bytes, Fingerprint::raw);
    Ok(Keyed {
        read,
        replay_guard: rules.replay_guard,
        event_id: (!body_hash).then_some(id),
        key,
        event_type,
        fingerprint,
        raw,
        signed,
    })
}

/// Stage 3: what follows (the wait for a holder, the reads of a recent
/// duplicate, the replay guard, the claim or enqueue, the archive), with
/// every lock wait it meets bounded by the call's deadline: a holder whose
/// transaction keeps the key's row locked or changed (a checkpoint or an
/// outbox put inside its step) would otherwise hold this call, even its
/// reads, past the provider's deadline. When the time runs out, what it
/// wrote is rolled back and the delivery answered `in_progress`.
fn store(conn: &Conn<'_>, intake: &Intake<'_>, d: &Keyed) -> Answer {
    let key = d.key(intake);
    let event_type = d.event_type.as_deref();
    within(intake.lock_deadline, |bound| stored(conn, intake, d, bound)).unwrap_or_else(|| {
        // Out of time: the key is busy in a transaction that has not ended.
        // A retry can succeed once the holder's lease runs out (the row as
        // the latest snapshot shows it), else within a lease (an uncommitted
        // first claim's: its copies come from one receiver, which asks for
        // the lease this call asks for; the source's when it names none).
        intake.count(event_type, Counter::for_outcome(Outcome::InProgress), true);
        // (the look opens the keys table: it must not wait either, for a
        // rewrite of the table that holds it, purge_redactions)
        let held_until = within(clock_now(), |_| store::look_now(conn, key))
            .flatten()
            .and_then(|looked| looked.stored.lease_expires_at)
            .filter(|until| *until > clock_now())
            .unwrap_or_else(|| clock_now().saturating_add(intake.lease_us()));
        Answer {
            idem_key: Some(d.key.clone()),
            outcome: Some(Kind::Claim(Outcome::InProgress)),
            retry_at: Some(held_until),
            ..d.read.clone()
        }
    })
}

/// [`store`]'s steps, inside the deadline's subtransaction.
fn stored(conn: &Conn<'_>, intake: &Intake<'_>, d: &Keyed, bound: &Bound) -> Answer {
    let r = &intake.request;
    let key = d.key(intake);
    let content = d.content();
    let event_type = d.event_type.as_deref();
    let wait_us = intake.wait_us;
    let replay_guard_on = d.replay_guard;
    // An in-flight duplicate first waits (at most wait_us) for the holder,
    // before anything is written: a claim's delivery count would hold the
    // key's row lock, which the holder's completion needs (crate::wait).
    let deadline = clock_now().saturating_add(wait_us);
    let claim = Claim { key, content, lease_us: r.lease_us, event_type, settings: Some(&intake.settings) };
    // Whether the key may exist: the wait's last look (which waited for a
    // transaction inserting it) found it, or there was no look.
    let may_exist = !(r.mode == Mode::Claim && wait_us > 0)
        || wait_for_holder(conn, &claim, deadline, intake.settings.max_attempts(), bound);
    let own_body = || replay_guards::owner_unlocked(conn, r.source, d.signed.as_bytes()).as_deref() == Some(&d.key[..]);
    // A recent duplicate of a key whose body this is (the guard says so,
    // read without a lock) is answered with reads alone: the guard's
    // locking read would take a transaction id and write. Without the
    // guard, the claim itself answers it so. A key the wait's look just
    // found absent is not looked for again: one stored since then goes
    // the full path, which answers it as correctly, with writes.
    let read_only: Option<ClaimRow> = (r.mode == Mode::Claim && replay_guard_on && may_exist)
        .then(|| {
            // while the caller may still wait, a held key is waited for on
            // the full path (the second wait, below)
            let waiting = wait_us > 0 && clock_now() < deadline;
            bound.refresh();
            claim::read_answer(conn, &claim, waiting, own_body)
        })
        .flatten();
    // The same in enqueue mode: a recent duplicate of this key whose body
    // this is, answered with reads alone (the enqueue of a key gone
    // meanwhile stores it again, and takes the guard's lock).
    let enqueued = (r.mode == Mode::Enqueue && replay_guard_on)
        .then(|| {
            bound.refresh();
            queue::read_answer(conn, key, content, own_body)
        })
        .flatten();
    if replay_guard_on && read_only.is_none() && enqueued.is_none() {
        bound.refresh();
        if let Some(replayed) = replay_guard(conn, key, d.signed.as_bytes(), content, r.mode) {
            intake.count(event_type, Counter::Replayed, false);
            return Answer {
                idem_key: Some(replayed.idem_key),
                outcome: Some(Kind::Claim(replayed.outcome)),
                result: replayed.result,
                ..d.read.clone()
            };
        }
    }
    let event_id = d.event_id.as_deref();
    match r.mode {
        Mode::Claim => {
            // Another copy may have claimed the key after the wait looked
            // (two copies sent together): then wait again for it, until the
            // deadline, before anything is written.
            let claimed = read_only.unwrap_or_else(|| loop {
                let waiting = wait_us > 0 && clock_now() < deadline;
                bound.refresh();
                match claim::claim_unless_held(conn, &claim, waiting) {
                    Some(claimed) => break claimed,
                    None => {
                        wait_for_holder(conn, &claim, deadline, intake.settings.max_attempts(), bound);
                    }
                }
            });
            if let Some(conflict) = claimed.archived_as() {
                let archived = Archived {
                    key,
                    received_at: claimed.at,
                    event_id,
                    event_type,
                    conflict,
                    payload: r.body,
                    headers: r.given_headers,
                };
                bound.refresh();
                super::archive::keep(conn, &archived);
            }
            Answer {
                idem_key: Some(d.key.clone()),
                outcome: Some(Kind::Claim(claimed.outcome)),
                claim_token: claimed.token,
                attempt: Some(claimed.attempt),
                result: claimed.result,
                last_step: claimed.last_step,
                retry_at: claimed.retry_at,
                ..d.read.clone()
            }
        }
        Mode::Enqueue => {
            let outcome = enqueued.unwrap_or_else(|| {
                bound.refresh();
                let origin = Origin { event_id, headers: r.given_headers, reconciled: false };
                queue::enqueue(
                    conn,
                    &Enqueue { key, payload: r.body, content, event_type, headers: None, origin: Some(origin) },
                )
            });
            Answer { idem_key: Some(d.key.clone()), outcome: Some(queue::kind(outcome)), ..d.read.clone() }
        }
    }
}

/// Whether the current transaction had written before this call (it has a
/// transaction id).
fn transaction_wrote() -> bool {
    // SAFETY: reads the current transaction's state; assigns nothing.
    unsafe { pg_sys::GetTopTransactionIdIfAny() != pg_sys::InvalidTransactionId }
}

/// Wait, until `deadline`, while `c.key` is held by another worker's live
/// lease so that a claim of this content would answer `in_progress`
/// ([`claim::held_elsewhere`]); a conflicting delivery, a completed,
/// failed, parked or expired key, or a row this transaction wrote ends it
/// at once. Nothing is locked or written meanwhile ([`crate::wait`]). Each
/// look, which may wait for a transaction inserting the key, and what
/// follows the wait, wait for a lock at most until `bound`'s deadline.
///
/// Returns whether the last look found the key (a row visible to the
/// latest snapshot, after waiting for a transaction inserting it).
fn wait_for_holder(conn: &Conn<'_>, c: &Claim<'_>, deadline: i64, max_attempts: i32, bound: &Bound) -> bool {
    let mut seen = true;
    crate::wait::wait(c.key, deadline, |now| {
        // the look may wait for a transaction inserting the key: at most
        // the time left
        bound.refresh();
        // Each look in a memory context of its own: a long wait looks many
        // times, and what opening the table allocates is freed with it.
        // SAFETY: what the look returns lives on the Rust heap (Looked
        // holds no palloc'd pointer); what it pallocs in the context is
        // freed with it.
        let looked =
            unsafe { pgrx::PgMemoryContexts::new("webhook_dedup look").switch_to(|_| store::look(conn, c.key)) };
        seen = looked.is_some();
        looked
            .and_then(|looked| claim::held_elsewhere(&looked, now, c.content, max_attempts))
            .map_or(crate::wait::Look::Done, crate::wait::Look::HeldUntil)
    });
    // what comes next waits for locks at most the time left
    bound.refresh();
    seen
}

/// The keys of `source` valid at `at` for `scheme`
/// (`webhook_dedup.source_secrets`, oldest first: those `add_secret`
/// accepted for `scheme`, or for none), each checked as a key of `scheme`:
/// 55000 when there is none (the delivery cannot be verified until one is
/// added; a provider retries the error), 22023 naming the key id when one
/// cannot be a key of the scheme (the secret is never echoed).
fn stored_keys(conn: &Conn<'_>, scheme: Scheme, source: &str, at: i64) -> Vec<StoredSecret> {
    let all = store::secrets::of(conn, source);
    let valid: Vec<_> = all.iter().filter(|k| k.valid_at(at) && k.serves(scheme.name())).cloned().collect();
    if valid.is_empty() {
        let other: Vec<&str> = all.iter().filter_map(|k| k.scheme.as_deref()).filter(|s| *s != scheme.name()).collect();
        let hint = if other.is_empty() {
            "Add one with webhook_dedup.add_secret (as webhook_dedup_operator), or pass secrets.".to_string()
        } else {
            format!(
                "The source's keys were added for scheme {} and verify only that scheme; \
                 add a key for {} with webhook_dedup.add_secret once the source's provider says so.",
                other[0],
                scheme.name()
            )
        };
        Error::NotInPrerequisiteState {
            message: format!(
                "source \"{source}\" has no verification key for scheme {} valid at the delivery's time",
                scheme.name()
            ),
            hint: Some(hint),
        }
        .raise()
    }
    for k in &valid {
        let checked = signature::check_secret(&k.secret).map_err(|p| p.named("the secret"));
        if let Err(e) = checked.and_then(|()| signature::keys(scheme, &[k.secret.as_str()]).map(drop)) {
            Error::invalid(format!(
                "key {} of source \"{source}\" in webhook_dedup.source_secrets cannot verify scheme {}: {e}",
                k.id,
                scheme.name()
            ))
            .raise()
        }
    }
    valid
}

/// The answer of a handshake: `outcome = 'handshake'` and the body to
/// answer, or, for an answer refused as unsafe, `reject_reason =
/// 'refused_handshake'` and no outcome. `verified` says whether the
/// request was signed (X's CRC is not).
fn handshake_answer(handshake: handshake::Answer, verified: bool) -> Answer {
    match handshake {
        handshake::Answer::Respond(response) => Answer {
            verified,
            outcome: Some(Kind::Handshake),
            response: Some(Jsonb::from_text(&response.to_string())),
            ..Answer::default()
        },
        handshake::Answer::Refused(_) => Answer { verified, ..Answer::rejected(Rejection::RefusedHandshake) },
    }
}
