"""Out-of-order delivery end to end: real Stripe-signed deliveries through
webhook_receive (verify, key, claim), then applied under the out-of-order
guard, with webhook_advance and with the trigger webhook_monotonic_guard.

The case: `payment_intent.payment_failed` (created 10:00:04) is delivered and
applied; then an older `payment_intent.processing` about the same intent
(created 10:00:01, retried by Stripe) arrives. Both are new events (two
claims), but the second is stale: the intent must stay `payment_failed`.
The event time is the one webhook_receive reads from the body by the Stripe
profile (`created`, Unix seconds), so nothing is parsed in the receiver.
"""

import hashlib
import hmac
import json
import time
import uuid

import psycopg
import pytest

STRIPE_SECRET = "whsec_e2e_ordering"


def stripe_delivery(event_type: str, intent: str, created: int) -> tuple[bytes, dict]:
    """A Stripe event body and its headers, signed as Stripe signs
    (docs.stripe.com/webhooks#verify-manually: v1 = HMAC-SHA256 of "t.body")."""
    body = json.dumps({
        "id": f"evt_{uuid.uuid4().hex}",
        "object": "event",
        "type": event_type,
        "created": created,
        "data": {"object": {"id": intent, "object": "payment_intent", "status": event_type.split(".")[1]}},
    }).encode()
    t = int(time.time())
    v1 = hmac.new(STRIPE_SECRET.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return body, {"stripe-signature": f"t={t},v1={v1}", "content-type": "application/json"}


def receive(conn, body: bytes, headers: dict):
    """webhook_receive in its own autocommitted statement, as a receiver calls it."""
    return conn.execute(
        "SELECT verified, outcome, idem_key, claim_token, event_time FROM webhook_dedup.webhook_receive("
        " 'stripe', %s, %s::jsonb, ARRAY[%s])",
        (body, json.dumps(headers), STRIPE_SECRET),
    ).fetchone()


@pytest.fixture()
def conn():
    with psycopg.connect("", autocommit=True) as c:
        c.execute("CREATE SCHEMA IF NOT EXISTS e2e_ordering")
        c.execute("DROP TABLE IF EXISTS e2e_ordering.intents")
        c.execute("CREATE TABLE e2e_ordering.intents"
                  " (id text PRIMARY KEY, status text NOT NULL, source_updated_at timestamptz)")
        yield c
        c.execute("DROP SCHEMA e2e_ordering CASCADE")


def deliver_with_advance(conn, event_type: str, intent: str, created: int) -> str:
    """Receive, then in one transaction: advance the watermark, apply only if it
    moved, complete the key. Returns the claim outcome."""
    body, headers = stripe_delivery(event_type, intent, created)
    verified, outcome, key, token, event_time = receive(conn, body, headers)
    assert verified and outcome == "claimed", (verified, outcome)
    with conn.transaction():
        newer = conn.execute("SELECT webhook_dedup.webhook_advance('stripe', %s, %s, %s)",
                             (intent, event_time, key)).fetchone()[0]
        if newer:
            conn.execute("INSERT INTO e2e_ordering.intents (id, status) VALUES (%s, %s)"
                         " ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status",
                         (intent, event_type.split(".")[1]))
        completed = conn.execute("SELECT webhook_dedup.webhook_complete('stripe', %s, %s, %s::jsonb)",
                                 (key, token, json.dumps({"applied": newer}))).fetchone()[0]
        assert completed
    return "applied" if newer else "skipped"


def deliver_with_trigger(conn, event_type: str, intent: str, created: int) -> str:
    """Receive, then in one transaction: upsert the row (the trigger skips a
    stale one), complete the key with what happened."""
    body, headers = stripe_delivery(event_type, intent, created)
    verified, outcome, key, token, event_time = receive(conn, body, headers)
    assert verified and outcome == "claimed", (verified, outcome)
    with conn.transaction():
        cur = conn.execute(
            "INSERT INTO e2e_ordering.intents VALUES (%s, %s, %s)"
            " ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status,"
            "   source_updated_at = EXCLUDED.source_updated_at",
            (intent, event_type.split(".")[1], event_time))
        applied = cur.rowcount == 1
        conn.execute("SELECT webhook_dedup.webhook_complete('stripe', %s, %s, %s::jsonb)",
                     (key, token, json.dumps({"applied": applied})))
    return "applied" if applied else "skipped"


BASE = 1_767_261_600  # 2026-01-01 10:00:00 UTC


def status_of(conn, intent: str):
    return conn.execute("SELECT status FROM e2e_ordering.intents WHERE id = %s", (intent,)).fetchone()[0]


def test_an_older_event_delivered_later_is_skipped_by_webhook_advance(conn):
    intent = f"pi_{uuid.uuid4().hex[:12]}"
    assert deliver_with_advance(conn, "payment_intent.payment_failed", intent, BASE + 4) == "applied"
    assert deliver_with_advance(conn, "payment_intent.processing", intent, BASE + 1) == "skipped"
    assert status_of(conn, intent) == "payment_failed"
    watermark = conn.execute(
        "SELECT source_updated_at FROM webhook_dedup.watermarks WHERE source = 'stripe' AND entity_id = %s",
        (intent,)).fetchone()[0]
    assert int(watermark.timestamp()) == BASE + 4
    # a newer event still applies
    assert deliver_with_advance(conn, "payment_intent.succeeded", intent, BASE + 9) == "applied"
    assert status_of(conn, intent) == "succeeded"


def test_an_older_event_delivered_later_is_skipped_by_the_trigger(conn):
    conn.execute("CREATE TRIGGER monotonic BEFORE UPDATE ON e2e_ordering.intents"
                 " FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('source_updated_at')")
    intent = f"pi_{uuid.uuid4().hex[:12]}"
    assert deliver_with_trigger(conn, "payment_intent.payment_failed", intent, BASE + 4) == "applied"
    assert deliver_with_trigger(conn, "payment_intent.processing", intent, BASE + 1) == "skipped"
    assert status_of(conn, intent) == "payment_failed"
    assert deliver_with_trigger(conn, "payment_intent.succeeded", intent, BASE + 9) == "applied"
    assert status_of(conn, intent) == "succeeded"


def test_the_event_time_is_the_stripe_created_field(conn):
    body, headers = stripe_delivery("payment_intent.processing", "pi_time", BASE + 1)
    verified, outcome, key, token, event_time = receive(conn, body, headers)
    assert verified and outcome == "claimed"
    assert int(event_time.timestamp()) == BASE + 1
    conn.execute("SELECT webhook_dedup.webhook_complete('stripe', %s, %s)", (key, token))
