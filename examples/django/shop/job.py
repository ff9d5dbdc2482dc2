"""The job every delivery runs, exactly once, with psycopg's synchronous API:
the FastAPI example's two steps (../fastapi/job.py, whose docstring says why
each step commits with its record in one transaction), written for a
Django view. Step 1 writes the notification's outbox intent with the
checkpoint; step 2 the side effect and the subject's state, committed with
webhook_complete by the client package's with_claim."""

import json
import logging
import os
import time
from typing import Optional

import psycopg
from psycopg.types.json import Jsonb
from webhook_dedup import Claim, sync

log = logging.getLogger("webhook_dedup.example")

NOTIFIED = "notified"  # the checkpoint of step 1
NOTIFY_OPERATION = "notify"
NOTIFY_TARGET = "notifications"
CRASH_AFTER_CLAIM = "crash-after-claim"
CRASH_AFTER_CHECKPOINT = "crash-after-checkpoint"
SLOW = "slow"
SLOW_SECONDS = 3  # between the steps, holding the claim (tests only)


def die(fault: str) -> None:
    """Fault injection (tests only): exit at once, like kill -9: no answer,
    no ROLLBACK; PostgreSQL rolls back what was not committed."""
    log.error("fault injection: %s: exiting now, like kill -9", fault)
    os._exit(137)


def subject_of(payload: bytes) -> Optional[str]:
    """data.object.id (Stripe), else data.id (Standard Webhooks), else none."""
    try:
        event = json.loads(payload)
    except ValueError:
        return None
    data = event.get("data") if isinstance(event, dict) else None
    if not isinstance(data, dict):
        return None
    obj = data.get("object")
    value = obj.get("id") if isinstance(obj, dict) else data.get("id")
    return str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None


def notify(pool, delivery, crash: bool) -> bool:
    """Step 1: the notification's intent and its checkpoint, together."""
    with pool.connection() as conn:
        with conn.transaction() as tx:
            written = conn.execute(
                "SELECT webhook_dedup.webhook_outbox_put(%s, %s, %s, %s, %s, %s)",
                (delivery.source, delivery.idem_key, delivery.claim_token, NOTIFY_OPERATION, NOTIFY_TARGET,
                 Jsonb({"source": delivery.source, "idem_key": delivery.idem_key,
                        "event_type": delivery.event_type}))).fetchone()[0] is not None
            if crash:
                die(CRASH_AFTER_CLAIM)
            checkpointed = conn.execute("SELECT webhook_dedup.webhook_checkpoint(%s, %s, %s, %s)",
                                        (delivery.source, delivery.idem_key, delivery.claim_token,
                                         NOTIFIED)).fetchone()[0]
            if written and checkpointed:
                return True
            raise psycopg.Rollback(tx)  # the lease was lost: another worker holds the key
    return False


def run(pool, delivery, payload: bytes, fault: Optional[str] = None) -> Optional[dict]:
    """Both steps for a delivery webhook_receive claimed for us; the stored
    result, or None when the lease was lost (our step rolled back)."""
    if delivery.last_step != NOTIFIED:
        if not notify(pool, delivery, crash=fault == CRASH_AFTER_CLAIM):
            return None
        if fault == CRASH_AFTER_CHECKPOINT:
            die(fault)
        if fault == SLOW:
            time.sleep(SLOW_SECONDS)
    subject = subject_of(payload)

    def step2(conn, claim):
        side_effect_id = conn.execute(
            "INSERT INTO shop.side_effects (source, idem_key, event_type, attempt) VALUES (%s, %s, %s, %s)"
            " RETURNING id", (delivery.source, delivery.idem_key, delivery.event_type, delivery.attempt)).fetchone()[0]
        if subject is not None and delivery.event_time is not None:
            # a stale event does not move its subject back (the table's
            # webhook_monotonic_guard trigger skips the update)
            conn.execute("INSERT INTO shop.subjects (source, subject, last_event_type, source_updated_at)"
                         " VALUES (%s, %s, %s, %s) ON CONFLICT (source, subject) DO UPDATE"
                         " SET last_event_type = EXCLUDED.last_event_type,"
                         " source_updated_at = EXCLUDED.source_updated_at",
                         (delivery.source, subject, delivery.event_type, delivery.event_time))
        return {"status": 200, "side_effect_id": side_effect_id}

    done = sync.with_claim(pool, Claim(delivery.source, delivery.idem_key, delivery.claim_token), step2)
    if done.status == "failed":
        raise done.error
    return done.result if done.status == "completed" else None
