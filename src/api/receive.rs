//! `webhook_receive`: the whole intake in one round trip (verify, derive
//! the key from the provider's profile, claim or enqueue), and
//! `webhook_dedup.provider_profiles()`, the profiles as rows.

use super::args;
use super::claim::{claim_unless_held, read_answer};
use super::queue::{enqueue_one, Intake};
use super::verify::{header_map, verify_sql, HmacArgs};
use crate::answer::{self, Kind, Mode};
use crate::claim::{Outcome, State};
use crate::error::{required, Error, OrRaise, Raise};
use crate::handshake;
use crate::jsonb::Jsonb;
use crate::key::{body_hash_field, derive, Parts};
use crate::metrics::{self, Counter};
use crate::profile::{self, Body, Extracted, Fingerprint, Rules};
use crate::signature::{self, Scheme};
use crate::spi::{self, Conn};
use crate::store::archive::Archived;
use crate::store::replay_guards::{self, Guard};
use crate::store::signature_tokens::{self, Binding, Signed};
use crate::store::{self, sources, Key};
use crate::time::{clock_now, micros, timestamptz};
use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::{IntoDatum, Uuid};
use std::cell::Cell;

/// `reject_reason` of a delivery whose signature verified but whose signed
/// token was first seen with other content (a signature block copied onto
/// another body: `crate::store::signature_tokens`).
pub const TOKEN_REUSED: &str = "token_reused";

/// The row of `webhook_dedup.receive_result` (its columns, in order).
#[derive(Default, Clone)]
struct Answer {
    verified: bool,
    reject_reason: Option<String>,
    idem_key: Option<String>,
    outcome: Option<String>,
    claim_token: Option<Uuid>,
    attempt: Option<i32>,
    result: Option<Jsonb>,
    event_type: Option<String>,
    event_time: Option<TimestampWithTimeZone>,
    last_step: Option<String>,
    response: Option<Jsonb>,
    secret_index: Option<i32>,
    /// When a retry could succeed (`crate::api::claim::ClaimRow::retry_at`).
    retry_at: Option<i64>,
}

impl Answer {
    /// What happened, as the answer function knows it.
    fn kind(&self) -> Kind {
        match (self.reject_reason.as_deref(), self.outcome.as_deref()) {
            (Some("refused_handshake"), _) => Kind::RefusedHandshake,
            (Some("missing_event_id"), _) if self.verified => Kind::MissingEventId,
            (Some("repeated_header"), _) if self.verified => Kind::RepeatedHeader,
            (Some(_), _) => Kind::Rejected,
            (None, Some(outcome)) => Kind::parse(outcome).or_raise(),
            (None, None) => unreachable!("every answer has an outcome or a reject reason"),
        }
    }

    fn row(
        mut self,
        mode: Mode,
        scheme: Scheme,
        fcinfo: pg_sys::FunctionCallInfo,
    ) -> pgrx::composite_type!('static, "webhook_dedup.receive_result") {
        let kind = self.kind();
        let retry_after = answer::seconds_until(self.retry_at, clock_now());
        let reply = answer::reply(kind, mode, profile::profile(scheme), retry_after).or_raise();
        let (status, headers, response) = http_row(&reply, kind, self.result.as_ref(), self.response.take());
        super::rows::one_row(
            fcinfo,
            [
                self.verified.into_datum(),
                self.reject_reason.into_datum(),
                self.idem_key.into_datum(),
                self.outcome.into_datum(),
                self.claim_token.into_datum(),
                self.attempt.into_datum(),
                self.result.into_datum(),
                self.event_type.into_datum(),
                self.event_time.into_datum(),
                self.last_step.into_datum(),
                response.into_datum(),
                self.secret_index.into_datum(),
                status.into_datum(),
                headers.into_datum(),
            ],
        )
    }
}

/// The `http_status`, `http_headers` and `response` of `reply` for a
/// delivery of `kind`: the body is the stored `result` (a duplicate's),
/// the handshake's own answer, `{"status": <kind>}` or `{"error": ...}`;
/// NULL for `claimed`/`reclaimed`, whose body is the caller's own result
/// once its work committed. Shared by `webhook_receive` and
/// `webhook_dedup.http_answer`.
pub(crate) fn http_row(
    reply: &answer::Reply,
    kind: Kind,
    result: Option<&Jsonb>,
    handshake: Option<Jsonb>,
) -> (i32, Jsonb, Option<Jsonb>) {
    let headers: serde_json::Map<String, serde_json::Value> =
        reply.headers.iter().map(|(name, value)| (name.to_string(), serde_json::Value::from(value.as_str()))).collect();
    let status_body = || Jsonb::from_text(&serde_json::json!({ "status": kind.name() }).to_string());
    let body = match reply.body {
        answer::Body::Result if matches!(kind, Kind::Claim(Outcome::Claimed | Outcome::Reclaimed)) => None,
        answer::Body::Result => Some(result.cloned().unwrap_or_else(status_body)),
        answer::Body::Status => Some(status_body()),
        answer::Body::Error(text) => Some(Jsonb::from_text(&serde_json::json!({ "error": text }).to_string())),
        answer::Body::Handshake => handshake,
    };
    (i32::from(reply.status), Jsonb::from_text(&serde_json::Value::Object(headers).to_string()), body)
}

/// The whole intake of one delivery in one call, returning one row:
///
/// 1. **verify** the signature as `webhook_verify` does; a delivery that does
///    not verify gets `verified = false` and `reject_reason` (the reason of
///    `webhook_verify_detail`), and **nothing at all is written**: an
///    unauthenticated request never reserves or poisons a key (it is only
///    counted, in memory, as a signature rejection of `source` by reason);
/// 2. **answer a handshake** (Slack's `url_verification`, ...:
///    `crate::handshake`): `outcome = 'handshake'`, the JSON body to answer
///    with in `response`, nothing stored;
/// 3. **read the delivery** by the scheme's profile (`webhook_dedup.providers`)
///    with the source's own settings in its place (`webhook_dedup.sources`:
///    `event_id_from`, ..., `crate::intake`); an event type the source does
///    not accept (`accept_event_types`) is `outcome = 'ignored'`, nothing
///    stored, counted as `ignored`; a header the id, type or time is read
///    from that was sent more than once gets `verified = true`,
///    `reject_reason = 'repeated_header'` (400, nothing written, counted
///    with `missing_event_ids`): which value is the provider's cannot be
///    told (issue 41; docs/signatures.md, "Repeated headers");
/// 4. **derive the key**: `webhook_key(source, <event id>, environment,
///    account, operation)`, `source` defaulting to the scheme's name. A
///    delivery without an event id gets `verified = true`,
///    `reject_reason = 'missing_event_id'` and no outcome, unless
///    `body_key_fallback` asks for `webhook_body_key`;
/// 5. **guard against replays** where the source's replay guard is on
///    (github, shopify, linear and twilio by default, and a source whose
///    `event_id_from` is a header its scheme does not sign: the id is
///    unsigned; `crate::intake::SourceIntake::apply`): a signed body (for
///    twilio, its canonical signed text) already received under another
///    event id is answered from
///    that key (`duplicate` with its result, `in_progress`,
///    `unknown_outcome`, `dead_lettered`; `idem_key` names that key) and
///    processes nothing (`crate::store::replay_guards`);
/// 6. **claim** it (`mode => 'claim'`: the columns of `webhook_claim`) or
///    **store** it for the workers (`mode => 'enqueue'`: `outcome` is
///    `accepted`, `duplicate` or `conflict`), with the fingerprint of the
///    source's rule (`fingerprint_pointers`, else the profile's: the raw
///    body, or for Stripe the RFC 8785 canonical JSON of `/type` and
///    `/data`, so a retry that Stripe re-rendered is no conflict, or for
///    Twilio the signed text).
///
/// Between 1 and 2, a scheme whose signature covers nothing of the body
/// (Mailgun) binds its signed token to the bytes it first arrived with
/// (`crate::store::signature_tokens`): the token on other bytes is a
/// copied signature block, answered `verified = false`,
/// `reject_reason = 'token_reused'`, and nothing else is written. Stored
/// keys verify only the scheme `add_secret` accepted them for.
///
/// `tolerance` NULL means the source's `webhook_dedup.sources.tolerance`,
/// else the provider's default window. `event_type` and `event_time` are
/// read as in step 3 (`event_time` is NULL when absent or malformed);
/// `last_step` is where a reclaim resumes; `response` is set only for a
/// handshake. Arguments and errors as `webhook_verify` and `webhook_claim`;
/// 22023 for another `mode`, and for a `webhook_dedup.sources` row whose
/// intake settings do not check.
#[pg_extern(volatile, parallel_unsafe, schema = "webhook_dedup")]
#[allow(clippy::too_many_arguments)]
fn webhook_receive(
    scheme: Option<&str>,
    payload: Option<&[u8]>,
    headers: Option<Jsonb>,
    secrets: default!(Option<pgrx::datum::Array<'_, &str>>, "NULL"),
    source: default!(Option<&str>, "NULL"),
    environment: default!(Option<&str>, "NULL"),
    account: default!(Option<&str>, "NULL"),
    operation: default!(Option<&str>, "NULL"),
    mode: default!(Option<&str>, "'claim'"),
    lease: default!(Option<Interval>, "NULL"),
    body_key_fallback: default!(Option<bool>, false),
    tolerance: default!(Option<Interval>, "NULL"),
    at: default!(Option<TimestampWithTimeZone>, "now()"),
    url: default!(Option<&str>, "NULL"),
    signature_header: default!(Option<&str>, "NULL"),
    signature_prefix: default!(Option<&str>, "NULL"),
    algorithm: default!(Option<&str>, "NULL"),
    encoding: default!(Option<&str>, "NULL"),
    method: default!(Option<&str>, "NULL"),
    wait: default!(Option<Interval>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> pgrx::composite_type!('static, "webhook_dedup.receive_result") {
    // Every argument is checked before anything is written.
    let scheme_name = required(scheme, "scheme");
    let scheme_parsed = Scheme::parse(scheme_name).or_raise();
    let body = required(payload, "payload");
    let mode = Mode::parse(required(mode, "mode")).or_raise();
    let body_key_fallback = required(body_key_fallback, "body_key_fallback");
    let lease_us = lease.map(args::lease);
    let source = source.unwrap_or(scheme_parsed.name());
    crate::key::check_source(source).or_raise();
    // as given, for the payload archive
    let given_headers = headers;
    let headers = header_map(headers);
    // NULL: the source's keys in webhook_dedup.source_secrets
    let explicit: Option<Vec<Option<&str>>> = secrets.as_ref().map(|a| a.iter().collect());
    let at_us = micros(required(at, "at"), "at").or_raise();
    let budget_us = match wait {
        Some(wait) => check_wait(wait),
        None => profile::default_wait_ms(profile::profile(scheme_parsed)) * 1_000,
    };
    // Every lock wait of the call ends by then (within).
    let lock_deadline = clock_now().saturating_add(budget_us);
    // No wait for a holder where it cannot help (crate::wait): a
    // transaction that wrote before this call may hold the key's row lock
    // itself, and one that reads a single snapshot could not see the
    // holder's completion (its claim would end in 40001).
    let wait_us = if store::transaction_snapshot() || transaction_wrote() { 0 } else { budget_us };
    let hmac = HmacArgs { header: signature_header, prefix: signature_prefix, algorithm, encoding };
    // Twilio, Square and HubSpot sign the URL; X's receivers pass it for the CRC.
    let signed_url = if scheme_parsed == Scheme::Twitter { None } else { url };

    // One SPI connection for the whole intake (the source's settings and
    // keys, the guard, the claim or enqueue): a connection per step would
    // cost each its own set-up.
    let answer = spi::connected(|conn| {
        let settings = sources::settings(conn, source);
        let stored = explicit.is_none().then(|| stored_keys(conn, scheme_parsed, source, at_us));
        // the secrets to verify with, in order, and what each is called in
        // secret_index (its position, or its key id)
        let (secrets, ids): (Vec<Option<&str>>, Vec<i32>) = match (&explicit, &stored) {
            (Some(list), _) => (list.clone(), (1..=list.len() as i32).collect()),
            (None, Some(keys)) => keys.iter().map(|k| (Some(k.secret.as_str()), k.id)).unzip(),
            (None, None) => unreachable!("stored is read when no secrets are given"),
        };

        // X's CRC is unsigned: answered (or refused) before verification,
        // with the current secret (the first given, or the newest key);
        // nothing is read or written.
        if scheme_parsed == Scheme::Twitter {
            let checked = signature::check_secrets(&secrets).or_raise();
            let current = if explicit.is_some() { checked[0] } else { checked[checked.len() - 1] };
            let key = signature::secret_key(scheme_parsed, current).or_raise();
            if let Some(handshake) = handshake::unsigned(scheme_parsed, body, url, &key) {
                // Stored keys answer only for a source meant for X (its
                // provider, else its name, is twitter) and with a key that
                // add_secret accepted for X: the answer is a MAC of
                // caller-chosen text, and under another provider's key (a
                // Mailgun key signs "{timestamp}{token}") it would be a
                // valid signature of that provider. The provider can change
                // after the keys were added (issue 24); what a key was
                // accepted for cannot.
                let provider = settings.provider.as_deref().unwrap_or(source);
                let accepted_for_x = stored
                    .as_ref()
                    .and_then(|keys| keys.last())
                    .is_some_and(|k| k.scheme.as_deref() == Some(Scheme::Twitter.name()));
                if explicit.is_none() && (Scheme::parse(provider).ok() != Some(Scheme::Twitter) || !accepted_for_x) {
                    return handshake_answer(handshake::Answer::Refused("not a twitter source"), false);
                }
                return handshake_answer(handshake, false);
            }
        }

        let tolerance = tolerance.or(settings.tolerance);
        let verdict = verify_sql(
            Some(scheme_name),
            Some(body),
            &headers,
            secrets.clone(),
            tolerance,
            at,
            signed_url,
            method,
            hmac,
        );
        if !verdict.valid() {
            if let Some(counter) = Counter::for_rejection(verdict.reason) {
                metrics::count(source, None, counter, false);
            }
            return Answer { reject_reason: Some(verdict.reason.as_str().into()), ..Answer::default() };
        }
        let secret_index = verdict.secret_index.and_then(|i| ids.get(i).copied());

        // A signature that covers nothing of the body (Mailgun) is bound
        // to the bytes its token first arrived with: the same token on
        // other content is a copied signature block (issue 24).
        if let Some(token) = signature::signed_token(scheme_parsed, body) {
            let signed_at =
                verdict.signed_at.map_or(at_us, |t| (t - crate::calendar::PG_EPOCH_UNIX_S).saturating_mul(1_000_000));
            let tolerance_us = tolerance
                .map(|t| crate::time::duration_us(t, "tolerance").or_raise())
                .or(scheme_parsed.default_tolerance_s().map(|s| s * 1_000_000))
                .unwrap_or(0);
            // A token is remembered while its signed time is within the
            // source's retention: an older signature cannot be checked
            // against a token that may have been pruned, so it is refused
            // as too old, whatever the window (only a tolerance wider than
            // the retention lets one verify).
            if signed_at < at_us.saturating_sub(settings.retention_us()) {
                metrics::count(source, None, Counter::RejectedTimestampTooOld, false);
                return Answer {
                    reject_reason: Some(signature::Reason::TimestampTooOld.as_str().into()),
                    ..Answer::default()
                };
            }
            let signed = Signed { at: signed_at, window_until: signed_at.saturating_add(tolerance_us) };
            let token_hash = Fingerprint::raw(token.as_bytes());
            let body_hash = Fingerprint::raw(body);
            // the bind waits for another copy binding the same token in a
            // transaction still open: bounded as the rest of the call
            let bound = within(lock_deadline, |_| {
                signature_tokens::bind(conn, source, token_hash.as_bytes(), body_hash.as_bytes(), signed, clock_now())
            });
            match bound {
                Some(Binding::Other) => {
                    metrics::count(source, None, Counter::RejectedTokenReused, false);
                    return Answer { reject_reason: Some(TOKEN_REUSED.into()), secret_index, ..Answer::default() };
                }
                Some(_) => {}
                None => {
                    metrics::count(source, None, Counter::for_outcome(Outcome::InProgress), true);
                    return Answer {
                        verified: true,
                        secret_index,
                        outcome: Some(Outcome::InProgress.as_str().into()),
                        retry_at: Some(clock_now().saturating_add(settings.default_lease_us())),
                        ..Answer::default()
                    };
                }
            }
        }

        let json = Body::new(body);
        if let Some(secret) = verdict.secret_index.and_then(|i| secrets.get(i).copied().flatten()) {
            let key = signature::keys(scheme_parsed, &[secret]).or_raise().remove(0);
            // Discord's PING answer uses no key; a public key has no MAC.
            if let Some(handshake) = handshake::answer(scheme_parsed, &json, key.mac().unwrap_or_default()) {
                return Answer { secret_index, ..handshake_answer(handshake, true) };
            }
        }

        let intake = settings.intake();
        let rules = match intake {
            Some(intake) => intake.apply(Rules::of(scheme_parsed), scheme_parsed),
            None => Rules::of(scheme_parsed),
        };
        let Extracted { event_id, event_type, event_time } = match profile::extract(&rules, &headers, &json) {
            Ok(extracted) => extracted,
            // which of the values is the provider's cannot be told (issue
            // 41): refused like a delivery without an id, nothing written
            Err(profile::RepeatedHeader { .. }) => {
                metrics::count(source, None, Counter::MissingEventIds, false);
                return Answer {
                    verified: true,
                    secret_index,
                    reject_reason: Some("repeated_header".into()),
                    ..Answer::default()
                };
            }
        };
        let read = Answer {
            verified: true,
            secret_index,
            event_time: event_time.map(timestamptz),
            event_type: event_type.clone(),
            ..Answer::default()
        };
        if intake.is_some_and(|i| !i.accepts(event_type.as_deref())) {
            metrics::count(source, event_type.as_deref(), Counter::Ignored, false);
            return Answer { outcome: Some("ignored".into()), ..read };
        }
        let (event_id, body_hash) = match event_id {
            Some(id) => (id, false),
            None if body_key_fallback || rules.body_key => (body_hash_field(body), true),
            None => {
                metrics::count(source, event_type.as_deref(), Counter::MissingEventIds, false);
                return Answer { reject_reason: Some("missing_event_id".into()), ..read };
            }
        };
        let key = derive(&Parts { source, event_id: &event_id, environment, account, operation, body_hash }).or_raise();
        let idem_key = Key { source, idem_key: &key };
        // A scheme that signs the content but not the bytes (Twilio's sorted
        // form parameters) is identified by its canonical signed text
        // (FingerprintRule::SignedText, unless the source configured its
        // own rule): re-ordered or re-encoded form pairs are the same
        // signed request.
        let signed_text = signature::signed_content(scheme_parsed, body, signed_url);
        let fingerprint = rules.fingerprint.fingerprint_signed(&json, signed_text.as_deref());
        // The raw bytes' fingerprint too when the rule covers less: a key
        // stored under another rule still knows its own bytes
        // (crate::claim::same_bytes).
        let raw = if fingerprint.is_raw() { fingerprint } else { Fingerprint::raw(body) };
        let raw_if_other = (!fingerprint.is_raw()).then_some(raw.as_bytes());
        let content = Content { fingerprint: fingerprint.as_bytes(), raw: raw_if_other };
        // An in-flight duplicate first waits (at most wait_us) for the
        // holder, before anything is written: a claim's delivery count
        // would hold the key's row lock, which the holder's completion
        // needs (crate::wait).
        let deadline = clock_now().saturating_add(wait_us);
        // The guard keys on what the signature covers: the raw bytes, or
        // the canonical signed text (else a re-ordered form would be new).
        let signed = signed_text.as_deref().map_or(raw, Fingerprint::raw);
        // What follows (the wait for a holder, the reads of a recent
        // duplicate, the replay guard, the claim or enqueue, the archive)
        // with every lock wait it meets
        // bounded by the deadline (issue 41): a holder whose transaction
        // keeps the key's row locked or changed (a checkpoint or an outbox
        // put inside its step) would otherwise hold this call, even its
        // reads, past the provider's deadline. When the time runs out, what
        // it wrote is rolled back and the delivery answered in_progress.
        let stored = |bound: &Bound| -> Answer {
            // Whether the key may exist: the wait's last look (which waited
            // for a transaction inserting it) found it, or there was no look.
            let may_exist = !(mode == Mode::Claim && wait_us > 0)
                || wait_for_holder(conn, idem_key, content, deadline, settings.max_attempts(), bound);
            // A recent duplicate of a key whose body this is (the guard says
            // so, read without a lock) is answered with reads alone (issue 29):
            // the guard's locking read would take a transaction id and write.
            // Without the guard, the claim itself answers it so. A key the
            // wait's look just found absent is not looked for again (issue 29:
            // a new event's third look-up of its key): one stored since then
            // goes the full path, which answers it as correctly, with writes.
            let read_only = (mode == Mode::Claim && rules.replay_guard && may_exist)
                .then(|| {
                    let own_body = || {
                        replay_guards::owner_unlocked(conn, source, signed.as_bytes()).as_deref() == Some(key.as_str())
                    };
                    let (fingerprint, raw) = (Some(content.fingerprint), content.raw);
                    // while the caller may still wait, a held key is waited for
                    // on the full path (the second wait, below)
                    let waiting = wait_us > 0 && clock_now() < deadline;
                    bound.refresh();
                    read_answer(conn, idem_key, fingerprint, raw, event_type.as_deref(), waiting, own_body)
                })
                .flatten();
            // The same in enqueue mode: a recent duplicate of this key whose
            // body this is, answered with reads alone (the enqueue of a key
            // gone meanwhile stores it again, and takes the guard's lock).
            let enqueued = (mode == Mode::Enqueue && rules.replay_guard)
                .then(|| {
                    let own_body = || {
                        replay_guards::owner_unlocked(conn, source, signed.as_bytes()).as_deref() == Some(key.as_str())
                    };
                    bound.refresh();
                    super::queue::read_answer(conn, idem_key, content.fingerprint, content.raw, own_body)
                })
                .flatten();
            if rules.replay_guard && read_only.is_none() && enqueued.is_none() {
                bound.refresh();
                if let Some(replayed) = replay_guard(conn, idem_key, signed.as_bytes(), content, mode) {
                    metrics::count(source, event_type.as_deref(), Counter::Replayed, false);
                    return Answer {
                        idem_key: Some(replayed.idem_key),
                        outcome: Some(replayed.outcome.into()),
                        result: replayed.result,
                        ..read.clone()
                    };
                }
            }
            match mode {
                Mode::Claim => {
                    // Another copy may have claimed the key after the wait
                    // looked (two copies sent together): then wait again for
                    // it, until the deadline, before anything is written.
                    let claimed = read_only.unwrap_or_else(|| loop {
                        let waiting = wait_us > 0 && clock_now() < deadline;
                        let (fingerprint, raw, event_type) =
                            (Some(content.fingerprint), content.raw, event_type.as_deref());
                        bound.refresh();
                        match claim_unless_held(conn, idem_key, fingerprint, raw, lease_us, event_type, waiting) {
                            Some(claimed) => break claimed,
                            None => {
                                wait_for_holder(conn, idem_key, content, deadline, settings.max_attempts(), bound);
                            }
                        }
                    });
                    if let Some(conflict) = claimed.archived_as() {
                        let archived = Archived {
                            key: idem_key,
                            received_at: claimed.at,
                            event_id: (!body_hash).then_some(event_id.as_str()),
                            event_type: event_type.as_deref(),
                            conflict,
                            payload: body,
                            headers: given_headers,
                        };
                        bound.refresh();
                        super::archive::keep(conn, &archived);
                    }
                    Answer {
                        idem_key: Some(key.clone()),
                        outcome: Some(claimed.outcome),
                        claim_token: claimed.token,
                        attempt: Some(claimed.attempt),
                        result: claimed.result,
                        last_step: claimed.last_step,
                        retry_at: claimed.retry_at,
                        ..read.clone()
                    }
                }
                Mode::Enqueue => {
                    let event_id = (!body_hash).then_some(event_id.as_str());
                    let outcome = enqueued.unwrap_or_else(|| {
                        bound.refresh();
                        enqueue_one(
                            conn,
                            idem_key,
                            body,
                            content.fingerprint,
                            content.raw,
                            event_type.as_deref(),
                            None,
                            Some(Intake { event_id, headers: given_headers, reconciled: false }),
                        )
                    });
                    Answer { idem_key: Some(key.clone()), outcome: Some(outcome.as_str().into()), ..read.clone() }
                }
            }
        };
        within(lock_deadline, stored).unwrap_or_else(|| {
            // Out of time: the key is busy in a transaction that has not
            // ended. A retry can succeed once the holder's lease runs out
            // (the row as the latest snapshot shows it), else in a lease of
            // the source's (an uncommitted first claim's).
            metrics::count(source, event_type.as_deref(), Counter::for_outcome(Outcome::InProgress), true);
            // (the look opens the keys table: it must not wait either, for
            // a rewrite of the table that holds it, purge_redactions)
            let held_until = within(clock_now(), |_| store::look_now(conn, idem_key))
                .flatten()
                .and_then(|looked| looked.stored.lease_expires_at)
                .filter(|until| *until > clock_now())
                .unwrap_or_else(|| clock_now().saturating_add(settings.default_lease_us()));
            Answer {
                idem_key: Some(key.clone()),
                outcome: Some(Outcome::InProgress.as_str().into()),
                retry_at: Some(held_until),
                ..read
            }
        })
    });
    answer.row(mode, scheme_parsed, fcinfo)
}

/// Whether the current transaction had written before this call (it has a
/// transaction id).
fn transaction_wrote() -> bool {
    // SAFETY: reads the current transaction's state; assigns nothing.
    unsafe { pg_sys::GetTopTransactionIdIfAny() != pg_sys::InvalidTransactionId }
}

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
fn within<R>(deadline: i64, stored: impl FnOnce(&Bound) -> R) -> Option<R> {
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
struct Bound {
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
    fn refresh(&self) {
        let (ms, session) = self.effective_ms();
        if self.set_ms.get() - ms > REFRESH_SLACK_MS {
            crate::subxact::set_for_level("lock_timeout", &format!("{ms}ms"));
            self.set_ms.set(ms);
            self.session_in_force.set(session);
        }
    }
}

/// The longest `wait`: no provider documents a longer response deadline
/// than this, and each waiting call holds a database connection.
const MAX_WAIT_US: i64 = 60 * 1_000_000;

/// `wait` in microseconds: 22023 unless between 0 and 60 seconds without
/// months.
fn check_wait(wait: Interval) -> i64 {
    let us = crate::time::duration_us(wait, "wait").or_raise();
    if !(0..=MAX_WAIT_US).contains(&us) {
        Error::invalid("wait must be between 0 and 60 seconds").raise();
    }
    us
}

/// Wait, until `deadline`, while `key` is held by another worker's live
/// lease so that a claim of this content would answer `in_progress`
/// ([`super::claim::held_elsewhere`]); a conflicting delivery, a
/// completed, failed, parked or expired key, or a row this transaction
/// wrote ends it at once. Nothing is locked or written meanwhile
/// ([`crate::wait`]). Each look, which may wait for a transaction
/// inserting the key, and what follows the wait, wait for a lock at most
/// until `bound`'s deadline ([`within`]).
///
/// Returns whether the last look found the key (a row visible to the
/// latest snapshot, after waiting for a transaction inserting it).
fn wait_for_holder(
    conn: &Conn<'_>,
    key: Key<'_>,
    content: Content<'_>,
    deadline: i64,
    max_attempts: i32,
    bound: &Bound,
) -> bool {
    let mut seen = true;
    crate::wait::wait(key, deadline, |now| {
        // the look may wait for a transaction inserting the key: at most
        // the time left
        bound.refresh();
        // Each look in a memory context of its own: a long wait looks many
        // times, and what opening the table allocates is freed with it.
        // SAFETY: what the look returns lives on the Rust heap (Looked
        // holds no palloc'd pointer); what it pallocs in the context is
        // freed with it.
        let looked = unsafe { pgrx::PgMemoryContexts::new("webhook_dedup look").switch_to(|_| store::look(conn, key)) };
        seen = looked.is_some();
        looked
            .and_then(|looked| {
                super::claim::held_elsewhere(&looked, now, Some(content.fingerprint), content.raw, max_attempts)
            })
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
fn stored_keys(conn: &Conn<'_>, scheme: Scheme, source: &str, at: i64) -> Vec<store::secrets::StoredSecret> {
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

/// The row of a handshake: `outcome = 'handshake'` and the body to answer,
/// or, for an answer refused as unsafe, `reject_reason = 'refused_handshake'`
/// and no outcome. `verified` says whether the request was signed (X's CRC
/// is not).
fn handshake_answer(handshake: handshake::Answer, verified: bool) -> Answer {
    match handshake {
        handshake::Answer::Respond(response) => Answer {
            verified,
            outcome: Some("handshake".into()),
            response: Some(Jsonb::from_text(&response.to_string())),
            ..Answer::default()
        },
        handshake::Answer::Refused(_) => {
            Answer { verified, reject_reason: Some("refused_handshake".into()), ..Answer::default() }
        }
    }
}

/// A replay the guard answered: the key the body belongs to, and what a
/// delivery of that key would be told.
struct Replayed {
    idem_key: String,
    outcome: &'static str,
    result: Option<Jsonb>,
}

/// What a delivery says about its content ([`crate::claim::same_bytes`]).
#[derive(Clone, Copy)]
struct Content<'a> {
    /// Under the source's fingerprint rule.
    fingerprint: &'a [u8],
    /// Of the raw bytes, when the rule covers less.
    raw: Option<&'a [u8]>,
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
/// guard and the owner read without a lock (issue 29: a replay then takes
/// no transaction id), where a recent duplicate may be
/// ([`super::claim::duplicate_read_interval`]).
fn replay_guard(
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
        // is answered from reads alone (issue 29), under the conditions of
        // a recent duplicate's read: the guard's locking read would take a
        // transaction id and write. Ordered before any change committing
        // meanwhile, as that read is; a body the delivery may take over
        // (answer None) takes the lock below, as before.
        if round == 0 && super::claim::duplicate_read_interval().is_some() {
            let owner = replay_guards::owner_unlocked(conn, key.source, body_sha256).filter(|o| o != key.idem_key);
            if let Some(owner) = owner {
                let found = replay_guards::owner(conn, key.source, &owner);
                if let Some((outcome, result)) = found.and_then(|o| replayed_answer(o, content, mode)) {
                    return Some(Replayed { idem_key: owner, outcome: outcome.as_str(), result });
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
            Some((outcome, result)) => return Some(Replayed { idem_key: owner, outcome: outcome.as_str(), result }),
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
    let took_it = o
        .fingerprint
        .as_deref()
        .is_none_or(|f| crate::claim::same_bytes(Some(f), Some(content.fingerprint), content.raw) == Some(f));
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

/// SQL functions in schema `webhook_dedup`.
#[pgrx::pg_schema]
mod webhook_dedup {
    use crate::profile::PROFILES;
    use pgrx::prelude::*;

    /// The built-in provider profiles (read them through the view
    /// `webhook_dedup.providers`).
    #[pg_extern(immutable, parallel_safe)]
    #[allow(clippy::type_complexity)]
    fn provider_profiles() -> TableIterator<
        'static,
        (
            name!(scheme, String),
            name!(event_id, Option<String>),
            name!(event_type, Option<String>),
            name!(event_time, Option<String>),
            name!(retry_horizon, Option<pgrx::datum::Interval>),
            name!(response_deadline, Option<pgrx::datum::Interval>),
            name!(default_wait, pgrx::datum::Interval),
            name!(retries_4xx, String),
            name!(disable_rule, String),
            name!(stop_signal, Option<String>),
            name!(fingerprint, String),
            name!(replay_guard, bool),
            name!(handshake, Option<String>),
            name!(notes, String),
            name!(sources, String),
        ),
    > {
        TableIterator::new(PROFILES.iter().map(|p| {
            let time =
                p.event_time.map(|(location, format)| format!("{} ({})", location.describe(), format.describe()));
            let horizon = p.retry_horizon_s.map(|s| {
                pgrx::datum::Interval::new(0, (s / 86_400) as i32, (s % 86_400) * 1_000_000)
                    .expect("a horizon of days and seconds is a valid interval")
            });
            let millis = |ms: i64| pgrx::datum::Interval::new(0, 0, ms * 1_000).expect("a few seconds");
            (
                p.scheme.name().to_string(),
                p.event_id.map(|l| l.describe()),
                p.event_type.map(|l| l.describe()),
                time,
                horizon,
                p.response_deadline_ms.map(millis),
                millis(crate::profile::default_wait_ms(Some(p))),
                p.retries_4xx.describe(),
                p.disable_rule.to_string(),
                p.stop_signal.map(|s| s.describe()),
                p.fingerprint.describe(),
                p.replay_guard,
                p.handshake.map(str::to_string),
                p.notes.to_string(),
                p.sources.to_string(),
            )
        }))
    }
}
