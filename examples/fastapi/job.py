"""The job every delivery runs, exactly once: two steps, each in ONE transaction.

Step 1 writes the notification's outbox intent (webhook_outbox_put) and the
checkpoint; step 2 the side effect, the subject's state and the completion.
sender.py delivers the intent to the notification service.

Shared by the receiver (app.py, which claims the key with webhook_receive)
and the worker (worker.py, which leases it with webhook_next): both hand a
Job to run(). The tables are those of examples/shop/setup.sql.

Why each step commits its own writes together with its record in
webhook_dedup (webhook_checkpoint, webhook_complete) in one transaction:
anywhere else a crash breaks exactly-once. Recorded after the step, a crash
between the two makes the retry redo the step (twice); recorded before it,
a crash between the two makes the retry skip a step that never happened
(never). In one transaction they commit together or not at all, and since
webhook_checkpoint and webhook_complete take the key's row lock, a
concurrent reclaim waits for our COMMIT and sees both or neither.

Both calls return false when our lease expired and another worker
reclaimed the key (the claim token we hold is stale, "fenced"): the step is
then that worker's, so ours is rolled back.
"""

import asyncio
import json
import logging
import os
from dataclasses import dataclass
from datetime import datetime
from typing import Optional
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

log = logging.getLogger("webhook_dedup.example")

NOTIFIED = "notified"  # the checkpoint recorded by step 1
# Step 1's outbox intent: its operation (one notification per event: part of
# its downstream idempotency key) and the senders that take it (sender.py).
NOTIFY_OPERATION = "notify"
NOTIFY_TARGET = "notifications"
CRASH_AFTER_CLAIM = "crash-after-claim"
CRASH_AFTER_CHECKPOINT = "crash-after-checkpoint"
# A slow job: sleep this long between the steps (holding the claim, no lock),
# so that a copy of the delivery arrives while it is processed.
SLOW = "slow"
SLOW_SECONDS = 3


@dataclass(frozen=True)
class Job:
    """One claimed (or leased) delivery: what the two steps need."""
    source: str  # the provider: github, stripe, standard
    idem_key: str
    claim_token: UUID  # proves we hold the key; stale once another worker reclaims it
    attempt: int  # 1 on the first claim, then 2, 3, ... on each reclaim
    last_step: Optional[str]  # 'notified' when a previous attempt did step 1
    event_type: Optional[str]
    event_time: Optional[datetime]  # when the provider says the event happened
    payload: bytes  # the raw body, exactly as received


async def run(conn: psycopg.AsyncConnection, job: Job, fault: Optional[str] = None) -> Optional[dict]:
    """Step 1 (unless a previous attempt did it), then step 2.

    Returns the result stored with the completion (the body of the answer,
    and of every later duplicate's), or None when the lease was lost and our
    step was rolled back. `fault` (tests only) kills the process mid-job,
    or slows it down.
    `conn` is in autocommit mode: `conn.transaction()` is a BEGIN ... COMMIT.
    """
    if job.last_step != NOTIFIED:
        if not await notify(conn, job, crash=fault == CRASH_AFTER_CLAIM):
            return None
        if fault == CRASH_AFTER_CHECKPOINT:
            die(fault)  # step 1 is committed with its checkpoint, step 2 never runs
        if fault == SLOW:
            await asyncio.sleep(SLOW_SECONDS)
    return await complete(conn, job)


async def notify(conn: psycopg.AsyncConnection, job: Job, crash: bool = False) -> bool:
    """Step 1: the notification's intent and its checkpoint commit together, or not at all.

    The notification is a call to another service (think: an e-mail API), so
    it cannot join this transaction: what commits here is the intent to send
    it (the transactional outbox, docs/outbox.md), which sender.py delivers
    with a downstream idempotency key derived from the event.
    """
    async with conn.transaction() as tx:
        # First in the transaction: fenced by our claim token, it takes the
        # key's row lock, held until COMMIT (a concurrent reclaim waits).
        # None: our lease was reclaimed (nothing written).
        cur = await conn.execute(
            "SELECT webhook_dedup.webhook_outbox_put(%s, %s, %s, %s, %s, %s)",
            (job.source, job.idem_key, job.claim_token, NOTIFY_OPERATION, NOTIFY_TARGET,
             Jsonb({"source": job.source, "idem_key": job.idem_key, "event_type": job.event_type})))
        written = (await cur.fetchone())[0] is not None
        if crash:
            # Die with the transaction open: the server rolls it back, so only
            # the claim survives (last_step still NULL) until its lease expires.
            die(CRASH_AFTER_CLAIM)
        cur = await conn.execute("SELECT webhook_dedup.webhook_checkpoint(%s, %s, %s, %s)",
                                 (job.source, job.idem_key, job.claim_token, NOTIFIED))
        if written and (await cur.fetchone())[0]:
            return True  # leaving the block commits
        log.warning("%s %s: lease lost before the checkpoint, notification rolled back",
                    job.source, job.idem_key)
        raise psycopg.Rollback(tx)  # leaving the block rolls back
    return False


async def complete(conn: psycopg.AsyncConnection, job: Job) -> Optional[dict]:
    """Step 2: the side effect, the subject's new state and the completion, together."""
    async with conn.transaction() as tx:
        cur = await conn.execute(
            "INSERT INTO shop.side_effects (source, idem_key, event_type, attempt)"
            " VALUES (%s, %s, %s, %s) RETURNING id",
            (job.source, job.idem_key, job.event_type, job.attempt))
        side_effect_id = (await cur.fetchone())[0]
        subject = subject_of(job.payload)
        if subject is not None and job.event_time is not None:
            # The table's webhook_monotonic_guard trigger skips this update when
            # the stored event is newer: a late, stale delivery is processed (it
            # has its side effect above) but does not move the subject back.
            await conn.execute(
                "INSERT INTO shop.subjects (source, subject, last_event_type, source_updated_at)"
                " VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (source, subject) DO UPDATE"
                " SET last_event_type = EXCLUDED.last_event_type,"
                "     source_updated_at = EXCLUDED.source_updated_at",
                (job.source, subject, job.event_type, job.event_time))
        result = {"status": 200, "side_effect_id": side_effect_id}
        cur = await conn.execute("SELECT webhook_dedup.webhook_complete(%s, %s, %s, %s)",
                                 (job.source, job.idem_key, job.claim_token, Jsonb(result)))
        if (await cur.fetchone())[0]:
            return result  # leaving the block commits
        log.warning("%s %s: lease lost before the completion, side effect rolled back",
                    job.source, job.idem_key)
        raise psycopg.Rollback(tx)
    return None


def subject_of(payload: bytes) -> Optional[str]:
    """The id of the object the event is about: data.object.id (Stripe), else
    data.id (the Standard Webhooks convention), else None (GitHub)."""
    try:
        event = json.loads(payload)
    except ValueError:
        return None  # not JSON (GitHub can also send form-encoded bodies)
    data = event.get("data") if isinstance(event, dict) else None
    if not isinstance(data, dict):
        return None
    obj = data.get("object")
    candidates = (obj.get("id") if isinstance(obj, dict) else None, data.get("id"))
    # a string or a number, as the Express and Sinatra examples take it (bool is an int in Python)
    ids = [i for i in candidates if isinstance(i, (str, int)) and not isinstance(i, bool)]
    return str(ids[0]) if ids else None


def die(fault: str) -> None:
    """Fault injection (tests only): exit at once, like kill -9.

    os._exit runs no clean-up: no answer is sent, no transaction is
    committed or rolled back by us; the server rolls back whatever was open
    when it sees the connection drop, exactly as for a killed process.
    """
    print(f"fault injection: {fault}: exiting now", flush=True)
    os._exit(1)
