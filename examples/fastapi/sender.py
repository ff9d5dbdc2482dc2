"""The sender: delivers the notifications the job writes to the outbox.

Step 1 of the job (job.py) commits an intent, `webhook_outbox_put(...,
'notify', 'notifications', request)`, together with its checkpoint. This
process takes due intents of the target `notifications` with
webhook_outbox_next (each leased to it, with a lease token), POSTs each
request to the notification service at NOTIFY_URL with the intent's
downstream idempotency key as the `Idempotency-Key` header, and reports:

- 2xx: webhook_outbox_ack, with the service's JSON answer;
- 3xx (redirects are not followed: a POST must not become a GET) and 4xx
  other than 408, 409 and 429 (the request is wrong and will stay wrong):
  webhook_outbox_fail(retryable => false), a dead letter for an operator;
- anything else (5xx, 408, 409, 429, a refused connection, a timeout):
  webhook_outbox_fail (retried after a backoff). A timeout may come after
  the service acted: the retry carries the same key, and the service
  answers it with the first call's result instead of acting again.

If this process dies between the call and the report, the intent's lease
lapses and the next sender (or this one, restarted) sends it again, with
the same key. Run as many as you like: webhook_outbox_next never hands one
intent to two senders (docs/outbox.md).

Environment: the libpq variables, NOTIFY_URL (required), SENDER_LEASE (a
PostgreSQL interval; unset: '30 seconds'), SENDER_FAULT (tests only:
crash-before-call or crash-after-call, fired on an intent's first attempt).
Stops cleanly on SIGTERM (or Ctrl-C) after the intent in hand.
"""

import json
import logging
import os
import signal
import sys
import time
import urllib.error
import urllib.request

import psycopg
from psycopg.rows import namedtuple_row
from psycopg.types.json import Jsonb

TARGET = "notifications"  # job.NOTIFY_TARGET
LEASE = os.environ.get("SENDER_LEASE", "30 seconds")
FAULT = os.environ.get("SENDER_FAULT")
# One intent per lease: a batch's leases start together, and a slow service
# would let the last ones lapse while the first are sent (docs/outbox.md,
# "One call per lease").
BATCH = 1
IDLE_SLEEP_S = 0.2
CALL_TIMEOUT_S = 10  # keep it well under the lease

log = logging.getLogger("webhook_dedup.example.sender")


class NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx is an answer, not a place to go: following it would turn the
    POST into a GET whose 2xx would be taken for a delivery."""

    def redirect_request(self, *args, **kwargs):
        return None


OPENER = urllib.request.build_opener(NoRedirects)


def call(url: str, key: str, request) -> tuple:
    """POST the request; (status, the JSON answer or None). status None: no answer."""
    req = urllib.request.Request(url, data=json.dumps(request).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Idempotency-Key": key})
    try:
        with OPENER.open(req, timeout=CALL_TIMEOUT_S) as resp:
            status, body = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, None
    except (urllib.error.URLError, OSError) as err:
        log.warning("%s: no answer: %s", key, err)
        return None, None
    try:
        answer = json.loads(body) if body else None
    except ValueError:
        answer = None  # a 2xx that is not JSON is still a delivery
    return status, answer


def die(fault: str) -> None:
    """Fault injection (tests only): exit at once, like kill -9."""
    print(f"fault injection: {fault}: exiting now", flush=True)
    os._exit(1)


def send(conn: psycopg.Connection, url: str, intent) -> None:
    fault = FAULT if intent.attempt == 1 else None
    if fault == "crash-before-call":
        die(fault)
    status, answer = call(url, intent.downstream_key, intent.request)
    if fault == "crash-after-call":
        die(fault)  # the service acted; the ack never comes: the lease lapses
    if status is not None and 200 <= status < 300:
        conn.execute("SELECT webhook_dedup.webhook_outbox_ack(%s, %s, %s)",
                     (intent.id, intent.lease_token, Jsonb(answer)))
        log.info("%s: delivered (attempt %d)", intent.downstream_key, intent.attempt)
        return
    # 5xx, a timeout, 408 and 429 may pass; 409 is Stripe's "this key is in
    # use by a request in flight"; other 4xx and 3xx will not get better
    retryable = status is None or status >= 500 or status in (408, 409, 429)
    state = conn.execute("SELECT webhook_dedup.webhook_outbox_fail(%s, %s, %s, retryable => %s)",
                         (intent.id, intent.lease_token, f"HTTP {status}" if status else "no answer",
                          retryable)).fetchone()[0]
    log.warning("%s: attempt %d failed (HTTP %s): %s", intent.downstream_key, intent.attempt, status, state)


def main() -> None:
    url = os.environ.get("NOTIFY_URL")
    if not url:
        print("cannot start: NOTIFY_URL is not set (the notification service's URL)", file=sys.stderr)
        sys.exit(1)
    stopping = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.append(True))
    # Autocommit: each lease and each report commits at once, so no
    # transaction stays open during a call.
    with psycopg.connect("", autocommit=True, row_factory=namedtuple_row) as conn:
        log.info("sender started (target %s, lease %s)", TARGET, LEASE)
        while not stopping:
            intents = conn.execute(
                "SELECT id, lease_token, downstream_key, request, attempt"
                "  FROM webhook_dedup.webhook_outbox_next(%s, %s::interval, %s)", (TARGET, LEASE, BATCH)).fetchall()
            for intent in intents:  # leased to us: send them even when asked to stop
                send(conn, url, intent)
            if not intents:
                time.sleep(IDLE_SLEEP_S)
    log.info("sender stopped")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
