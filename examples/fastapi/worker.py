"""The worker of the persist-then-process variant (WEBHOOK_MODE=enqueue).

app.py stores each verified delivery with webhook_dedup.webhook_receive(mode => 'enqueue')
and answers 200 at once; this process takes the stored deliveries with
webhook_next and runs the same job (job.py) on each. Run as many as you like:
webhook_next never hands the same key to two workers (SKIP LOCKED), and a
key whose worker died is handed out again once its lease expires, with
last_step telling the next worker where to resume.

Environment: the libpq variables (PGHOST, PGPORT, PGUSER, PGDATABASE),
WEBHOOK_LEASE (as for app.py), WORKER_FAULT (tests only: crash-after-claim or
crash-after-checkpoint, fired in the first job whose attempt is 1).
Stops cleanly on SIGTERM (or Ctrl-C): it finishes the jobs it has taken.
"""

import asyncio
import json
import logging
import os
import re
import signal
from datetime import datetime, timedelta, timezone
from typing import Optional

import psycopg
from psycopg.rows import namedtuple_row

import job

LEASE = os.environ.get("WEBHOOK_LEASE")  # None: the source's lease, else the extension's default
FAULT = os.environ.get("WORKER_FAULT")
BATCH = 10
IDLE_SLEEP_S = 0.5  # nothing was due: wait this long before asking again
# The event time formats of the providers' profiles (webhook_dedup.providers).
UNIX_SECONDS = re.compile(r"[0-9]{1,12}")
RFC3339 = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})"
                     r"(?:\.([0-9]+))?(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))")

log = logging.getLogger("webhook_dedup.example.worker")
# webhook_next hands out every due key, and a key claimed without its body
# (webhook_claim, or webhook_receive in claim mode) whose holder died is due
# once its lease lapses: there is no payload to run the job on. It is recorded
# as a retryable failure like any failed job: the provider's redelivery claims
# it again through the receiver, or its attempts run out into a dead letter.
NO_PAYLOAD = "no stored payload: the key was claimed without its body, and its provider's redelivery brings it"


def event_time(source: str, payload: bytes) -> Optional[datetime]:
    """When the event happened, read from the body as webhook_receive reads it
    (the provider's profile, webhook_dedup.providers): Stripe's `created`
    (Unix seconds), Standard Webhooks' `timestamp` (RFC 3339); GitHub sends
    none. None when there is none or it does not parse: no subject update.
    (A source whose event_time_from you set in webhook_dedup.sources needs the
    same change here.)"""
    try:
        event = json.loads(payload)
    except ValueError:
        return None  # not JSON (GitHub can also send form-encoded bodies)
    if not isinstance(event, dict):
        return None
    if source == "stripe":
        return unix_seconds(event.get("created"))
    if source == "standard":
        return rfc3339(event.get("timestamp"))
    return None


def unix_seconds(value) -> Optional[datetime]:
    """A JSON integer (or its digits in a string), as the profile's unix_seconds."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    text = str(value).strip()
    if not UNIX_SECONDS.fullmatch(text):
        return None
    try:
        return datetime.fromtimestamp(int(text), timezone.utc)
    except (OverflowError, ValueError):  # beyond Python's year 9999
        return None


def rfc3339(value) -> Optional[datetime]:
    """An RFC 3339 date-time string (2024-05-01T12:00:00.123456Z, with an offset
    or Z), as the profile's rfc3339: digits past the microsecond are dropped.
    (A leap second, :60, gives None here.)"""
    if not isinstance(value, str):
        return None
    m = RFC3339.fullmatch(value.strip())
    if not m:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
    microsecond = int((m.group(7) or "")[:6].ljust(6, "0"))
    sign, offset_hours, offset_minutes = m.group(8), int(m.group(9) or 0), int(m.group(10) or 0)
    if offset_hours > 23 or offset_minutes > 59:
        return None
    offset = timedelta(hours=offset_hours, minutes=offset_minutes) * (-1 if sign == "-" else 1)
    try:
        return datetime(year, month, day, hour, minute, second, microsecond, timezone(offset))
    except ValueError:  # no such day or time
        return None


async def run_one(conn: psycopg.AsyncConnection, row) -> None:
    """The job of one leased delivery; a failure schedules a retry of the key."""
    fault = FAULT if row.attempt == 1 else None
    try:
        if row.payload is None:
            raise ValueError(NO_PAYLOAD)
        work = job.Job(row.source, row.idem_key, row.claim_token, row.attempt, row.last_step,
                       row.event_type, event_time(row.source, row.payload), row.payload)
        result = await job.run(conn, work, fault)
        log.info("%s %s attempt %d: %s", row.source, row.idem_key, row.attempt,
                 "lease lost, left to its new holder" if result is None else "completed")
    except Exception as exc:
        # The job's transaction was rolled back. Record the failure: the key is
        # handed out again after a backoff (dead-lettered after max_attempts).
        # (If the database connection itself is gone, this raises too and the
        # worker exits: let your supervisor restart it.)
        log.exception("%s %s attempt %d failed", row.source, row.idem_key, row.attempt)
        await conn.execute("SELECT webhook_dedup.webhook_fail(%s, %s, %s, %s, retryable => true)",
                           (row.source, row.idem_key, row.claim_token, f"{type(exc).__name__}: {exc}"))


async def main() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    # Autocommit, as in app.py: webhook_next is its own statement, committed at
    # once, so the lease it takes is visible to every other worker at once.
    async with await psycopg.AsyncConnection.connect("", autocommit=True, row_factory=namedtuple_row) as conn:
        log.info("worker started (lease %s, batch %d)", LEASE or "default", BATCH)
        while not stop.is_set():
            cur = await conn.execute("SELECT * FROM webhook_dedup.webhook_next(lease => %s::interval, batch => %s)",
                                     (LEASE, BATCH))
            rows = await cur.fetchall()
            for row in rows:  # taken: finish them even when asked to stop
                await run_one(conn, row)
            if not rows:
                try:
                    await asyncio.wait_for(stop.wait(), IDLE_SLEEP_S)
                except asyncio.TimeoutError:
                    pass
    log.info("worker stopped")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    asyncio.run(main())
