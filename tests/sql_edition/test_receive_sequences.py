"""webhook_receive answers alike in both editions (issue 43, item 6):
random sequences of signed and forged deliveries of the providers the
SQL edition verifies, redelivered, re-rendered (Stripe's pending_webhooks),
conflicting, replayed under another id (the replay guard), sent as
handshakes (Slack, Zoom, X's CRC), with a Mailgun token copied onto other
bytes, in claim and enqueue mode; between them, the handlers' completions,
failures and forgets, workers' takes, maintenance passes and reconciled
events (reconcile). Each call's
row (or SQLSTATE, message and hint) and the final tables must be equal,
tokens and times normalised as in test_claim_sequences.

Deliveries are signed in the edition under test (webhook_sign, or the
test for Mailgun's body-borne signature) at one fixed time, which the
receive is told as `at` (or a time past the window). `wait` is 0 or
50 ms: the bounded wait is exercised without making a sequence slow.
WEBHOOK_DEDUP_DIFFERENTIAL_CASES bounds the sequences (a tenth of it,
at least 20, of 40 steps each).
"""

import hashlib
import hmac
import json
import os
import random

from editions import sql_edition_has_pgcrypto
from test_claim_sequences import FINAL, RESET, compare

CASES = int(os.environ.get("WEBHOOK_DEDUP_DIFFERENTIAL_CASES", "1000"))
SEED = int(os.environ.get("WEBHOOK_DEDUP_DIFFERENTIAL_SEED", "43"))
STEPS = 40

T = "2026-12-01 12:00:00+00"
T_UNIX = 1_796_126_400
LATE = "2026-12-01 12:10:00+00"  # past every timed scheme's window
SECRET = "s3cret-of-the-sender"
STRIPE_SECRET = "whsec_" + "c3RyaXBlLXNlY3JldC1rZXktYnl0ZXM="
TWILIO_URL = "https://example.com/hooks/twilio?x=1"
SQUARE_URL = "https://example.com/hooks/square"
HUBSPOT_URL = "https://example.com/hooks/hubspot"

RECEIVE = ("SELECT r.verified, r.reject_reason, r.idem_key, r.outcome, r.claim_token, r.attempt, r.result,"
           " r.event_type, extract(epoch FROM r.event_time)::text, r.last_step, r.response, r.secret_index,"
           " r.http_status, r.http_headers"
           " FROM webhook_dedup.webhook_receive(%s, %s, {headers}, %s::text[], source => %s, mode => %s,"
           " lease => %s::interval, body_key_fallback => %s, at => %s::timestamptz, url => %s, method => %s,"
           " signature_header => %s, wait => %s::interval) AS r")
SIGNED = ("webhook_dedup.webhook_sign(%s, %s, %s, at => %s::timestamptz, msg_id => %s, url => %s, method => %s,"
          " signature_header => %s) || %s::jsonb")
GIVEN = "%s::jsonb"

# the source of the generic scheme: its intake configured
ACME = ("INSERT INTO webhook_dedup.sources (source, event_id_from, event_type_from, event_time_from, event_time_format,"
        " fingerprint_pointers, accept_event_types, keep_payload) VALUES ('acme', 'header:X-Acme-Id', '/kind', '/at',"
        " 'unix_milliseconds', '{/kind,/data}', '{order.*,ping}', true)")
RECEIVE_RESET = [*RESET, "DELETE FROM webhook_dedup.replay_guards", "DELETE FROM webhook_dedup.signature_tokens",
                 "DELETE FROM webhook_dedup.source_secrets",
                 # (the keys' ids are their secret_index: numbered alike in both editions)
                 "SELECT setval(pg_get_serial_sequence('webhook_dedup.source_secrets', 'id'), 1, false)", ACME,
                 "INSERT INTO webhook_dedup.sources (source, keep_payload, provider) VALUES ('github', true, NULL),"
                 " ('x', false, 'twitter')",
                 f"SELECT webhook_dedup.add_secret('stripe', '{STRIPE_SECRET}', not_before => '2000-01-01')",
                 f"SELECT webhook_dedup.add_secret('x', '{SECRET}', not_before => '2000-01-01')"]
RECEIVE_FINAL = [*FINAL,
                 "SELECT source, body_sha256, idem_key FROM webhook_dedup.replay_guards ORDER BY 1, 2",
                 "SELECT source, token_sha256, body_sha256, signed_at, window_until FROM webhook_dedup.signature_tokens"
                 " ORDER BY 1, 2",
                 "SELECT source, idem_key, event_id, event_type, conflict, payload, headers FROM webhook_dedup.archive"
                 " ORDER BY 1, 2, received_at"]

IDS = ["e1", "e2", "e3"]


def delivery(rng: random.Random):
    """(scheme, source, body, extra headers, event id or None, url, method,
    signature_header) of one delivery."""
    schemes = ["github", "github", "stripe", "stripe", "shopify", "slack", "zoom", "standard", "twilio", "mailgun",
               "linear", "paddle", "typeform", "intercom", "square", "twitch", "calendly", "hubspot", "hmac", "hmac",
               "twitter"]
    if not sql_edition_has_pgcrypto():
        # the documented difference: HMAC-SHA1 needs pgcrypto (SHA1_SKIP)
        schemes = [s for s in schemes if s not in ("twilio", "intercom")]
    scheme = rng.choice(schemes)
    event = rng.choice(IDS)
    value = rng.choice([1, 1, 2])
    kind = rng.choice(["push", "push", "pull"])
    url = method = header = None
    source = scheme
    extra: dict = {}
    if scheme == "github":
        body = json.dumps({"action": kind, "n": value}).encode()
        extra = {"X-GitHub-Delivery": rng.choice([event, event, "r" + event]), "X-GitHub-Event": kind}
        event = extra["X-GitHub-Delivery"]
    elif scheme == "stripe":
        body = json.dumps({"id": event, "object": "event", "type": f"invoice.{kind}",
                           "pending_webhooks": rng.randint(0, 3), "created": rng.choice([T_UNIX, "x"]),
                           "data": {"object": {"amount": value, "big": rng.choice([1, 2**60, 2**60 + 1])}}}).encode()
    elif scheme == "shopify":
        body = json.dumps({"n": value}).encode()
        extra = {rng.choice(["X-Shopify-Event-Id", "X-Shopify-Webhook-Id"]): event, "X-Shopify-Topic": "orders/create",
                 "X-Shopify-Triggered-At": rng.choice(["2023-03-29T18:00:27.877041743Z", "2023-03-29 18:00:27Z",
                                                       "2023-03-29T18:00:27+02:00"])}
    elif scheme == "slack":
        if rng.random() < 0.2:
            body = json.dumps({"token": "t", "challenge": rng.choice(["ch4llenge", 7]), "type": "url_verification"}).encode()
        else:
            body = json.dumps({"event_id": event, "event": {"type": kind}, "event_time": T_UNIX, "n": value}).encode()
    elif scheme == "zoom":
        if rng.random() < 0.3:
            body = json.dumps({"event": "endpoint.url_validation",
                               "payload": {"plainToken": rng.choice(["qgg8vlvZRS6UYooatFL8Aw", "a:b", ""])}}).encode()
        else:
            body = json.dumps({"event": "meeting.started", "event_ts": T_UNIX * 1000 + 123, "n": value}).encode()
        event = None
    elif scheme == "standard":
        body = json.dumps({"type": kind, "timestamp": "2026-12-01T11:59:59.5Z", "data": {"n": value}}).encode()
    elif scheme == "twilio":
        body = rng.choice([f"CallSid=CA{value}&Digits=1234&From=%2B1", f"Digits=1234&CallSid=CA{value}&From=%2B1",
                           f"Digits=1234&From=+1&CallSid=CA{value}"]).encode()
        url = TWILIO_URL
        extra = {"I-Twilio-Idempotency-Token": event}
    elif scheme == "mailgun":
        token = rng.choice(["tok-1", "tok-1", "tok-2"])
        mac = hmac.new(rng.choice([SECRET, SECRET, "x"]).encode(), f"{T_UNIX}{token}".encode(), hashlib.sha256).hexdigest()
        body = json.dumps({"signature": {"timestamp": str(T_UNIX), "token": token, "signature": mac},
                           "event-data": {"id": event, "event": kind, "n": value}}).encode()
    elif scheme == "linear":
        body = json.dumps({"action": "create", "type": "Issue", "data": {"n": value}, "createdAt": "2026-12-01T11:00:00Z",
                           "webhookTimestamp": T_UNIX * 1000 + rng.choice([0, 0, 1])}).encode()
        extra = {"Linear-Delivery": event}
    elif scheme == "paddle":
        body = json.dumps({"event_id": event, "event_type": kind, "occurred_at": "2026-12-01T11:00:00.123456Z",
                           "data": {"n": value}}).encode()
    elif scheme == "typeform":
        body = json.dumps({"event_id": event, "event_type": "form_response",
                           "form_response": {"submitted_at": "2026-12-01T11:00:00Z", "n": value}}).encode()
    elif scheme == "intercom":
        body = json.dumps({"id": event, "topic": f"conversation.{kind}", "created_at": T_UNIX,
                           "delivery_attempts": rng.randint(1, 3), "data": {"n": value}}).encode()
    elif scheme == "square":
        body = json.dumps({"event_id": event, "type": kind, "created_at": "2026-12-01T11:00:00Z", "data": {"n": value}}).encode()
        url = SQUARE_URL
    elif scheme == "twitch":
        body = json.dumps({"subscription": {"type": kind}, "event": {"n": value}}).encode()
        extra = {"Twitch-Eventsub-Subscription-Type": kind}
    elif scheme == "calendly":
        body = json.dumps({"event": "invitee.created", "created_at": "2026-12-01T11:00:00.000000Z",
                           "payload": {"n": value}}).encode()
        event = None
    elif scheme == "hubspot":
        body = json.dumps([{"subscriptionType": "contact.creation", "occurredAt": T_UNIX * 1000,
                            "eventId": value}]).encode()
        url, method = HUBSPOT_URL, "POST"
        event = None
    elif scheme == "twitter":
        # X's CRC (a GET without a body), to the source meant for X or not
        source = rng.choice(["x", "x", "twitter"])
        url = "https://example.com/hooks/x?crc_token=" + rng.choice(["9b4507b3-9040-4669", "a%20b", ""])
        body = rng.choice([b"", b"", b'{"for_user_id":"1"}'])
        event = None
    else:  # hmac: the configured source acme
        source = "acme"
        header = "X-Acme-Signature"
        body = json.dumps({"kind": rng.choice(["order.paid", "order.paid", "ping", "refund", 7]), "at": T_UNIX * 1000,
                           "data": {"n": value}, "attempt": rng.randint(1, 3)}).encode()
        extra = {"X-Acme-Id": event}
    if rng.random() < 0.08 and body.startswith(b"{"):
        # a member the rules do not read that serde_json and PostgreSQL's
        # json read differently: U+0000 escaped (after an escaped
        # backslash, or a literal backslash before "u0000"), a number past
        # the doubles' range, nesting at and past serde_json's limit
        member = rng.choice(['"a\\u0000b"', '"\\\\\\u0000"', '"\\\\u0000"', "1e400",
                             "[" * 126 + "]" * 126, "[" * 127 + "]" * 127])
        body = b'{"z":' + member.encode() + b"," + body[1:]
    if rng.random() < 0.05 and extra:
        # a header sent twice
        name = rng.choice(list(extra))
        extra[name] = [extra[name], extra[name]]
    return scheme, source, body, extra, event, url, method, header


def receive_step(rng: random.Random):
    scheme, source, body, extra, event, url, method, header = delivery(rng)
    mode = rng.choice(["claim"] * 4 + ["enqueue"])
    lease = rng.choice([None, None, "1 microsecond", "1 hour"])
    wait = rng.choice(["0", "0", "0", "50 milliseconds"])
    at = rng.choice([T] * 9 + [LATE])
    key = (source, f"{source}:{event}") if event and not isinstance(extra.get("X-GitHub-Delivery"), list) else None
    stored = source in ("stripe", "x") and rng.random() < 0.8
    secrets = None if stored else [rng.choice([SECRET] * 9 + ["wrong"])]
    if scheme == "stripe" and not stored:
        secrets = [STRIPE_SECRET]
    signing_secret = STRIPE_SECRET if scheme == "stripe" else rng.choice([SECRET] * 9 + ["forger"])
    fallback = rng.random() < 0.1
    tail = (secrets, source, mode, lease, fallback, at, url, method, header, wait)
    if scheme in ("mailgun", "twitter"):
        return RECEIVE.format(headers=GIVEN), (scheme, body, json.dumps(extra), *tail), key, None
    msg_id = event if scheme in ("standard", "twitch") else None
    sign_url = url if scheme in ("twilio", "square", "hubspot") else None
    return (RECEIVE.format(headers=SIGNED),
            (scheme, body, scheme, body, signing_secret, T, msg_id, sign_url, method, header, json.dumps(extra), *tail),
            key, None)


def handler_step(rng: random.Random, keys):
    """A handler's or a worker's call on a key a delivery made."""
    source, key = rng.choice(keys)
    token = rng.choice(["current", "current", "stale", None])
    kind = rng.choice(["complete", "complete", "fail", "forget", "next", "maintenance", "reconcile"])
    if kind == "complete":
        return ("SELECT webhook_dedup.webhook_complete(%s, %s, %s, %s::jsonb)",
                (source, key, None, rng.choice([None, '{"ok": 1}'])), (source, key), token)
    if kind == "fail":
        return ("SELECT webhook_dedup.webhook_fail(%s, %s, %s, %s, retryable => %s, retry_after => %s::interval)",
                (source, key, None, "boom", rng.choice([True, False]), rng.choice(["0", "1 hour"])), (source, key), token)
    if kind == "reconcile":
        # an event a reconciliation job fetched: enqueued under the
        # source's rules (a source of no scheme: its raw bytes)
        _, source, body, _, event, _, _, _ = delivery(rng)
        source = rng.choice([source] * 9 + ["nope"])
        event = event or "e1"
        return ("SELECT webhook_dedup.reconcile(%s, %s, %s, event_type => %s, headers => %s::jsonb)",
                (source, event, body, rng.choice([None, "invoice.push", "order.paid", "refund"]),
                 rng.choice([None, '{"x-id": ["1"]}'])), (source, f"{source}:{event}"), None)
    if kind == "forget":
        return "SELECT webhook_dedup.webhook_forget(%s, %s)", (source, key), None, None
    if kind == "next":
        return ("SELECT * FROM webhook_dedup.webhook_next(NULL, %s::interval, 50)", (rng.choice(["1 hour", "1 microsecond"]),),
                ("*", None), None)
    return ("SELECT ran, leases_expired, dead_lettered, keys_pruned, keys_kept, history_pruned, more, errors"
            " FROM webhook_dedup.run_maintenance()", (), None, None)


def sequence(rng: random.Random):
    calls, keys = [], [("github", "github:e1"), ("stripe", "stripe:e1"), ("acme", "acme:e1")]
    for _ in range(STEPS):
        if rng.random() < 0.7:
            call = receive_step(rng)
            if call[2] is not None and call[2] not in keys:
                keys.append(call[2])
        else:
            call = handler_step(rng, keys)
        calls.append(call)
    return calls


def test_generated_receive_sequences_answer_alike(native, sql):
    outcomes, reasons = set(), set()
    for n in range(max(CASES // 10, 20)):
        rng = random.Random(f"{SEED}-receive-{n}")
        answers, _ = compare(native, sql, sequence(rng), f"receive sequence {n}", RECEIVE_RESET, RECEIVE_FINAL)
        for got in answers:
            if got[0] == "rows" and got[1] and len(got[1][0]) == 14:
                row = got[1][0]
                outcomes.add(row[3])
                reasons.add(row[1])
    # the sequences reach every stage's answers
    assert {"claimed", "reclaimed", "in_progress", "duplicate", "conflict", "accepted", "handshake",
            "ignored"} <= outcomes, outcomes
    assert {"no_matching_signature", "timestamp_too_old", "missing_event_id", "repeated_header", "token_reused",
            "refused_handshake"} <= reasons, reasons
