#!/usr/bin/env python3
"""A GitHub webhook receiver whose whole correctness lives in SQL (webhook_dedup).

Webhook providers deliver *at least once*: they retry on timeouts and non-2xx
answers, sometimes send the same delivery twice at the same moment, and anyone
can POST to your URL. A receiver therefore needs four things, and with
webhook_dedup each is one SQL call:

1-3. One call verifies the signature over the exact raw body bytes, derives
   a scoped idempotency key from GitHub's delivery id (X-GitHub-Delivery, by
   the provider profile) and claims it, in its own autocommitted statement
   so other workers see the claim at once:
       SELECT * FROM webhook_dedup.webhook_receive('github', body, headers, secrets,
                                                   lease => ..., wait => ...)
   A delivery that does not verify writes nothing at all (no key, no claim).
   (The same three steps exist as separate calls: webhook_verify,
   webhook_key, webhook_claim.)
   The row also carries the HTTP answer, computed by the database for every
   outcome: http_status, http_headers and response (the JSON body). This
   receiver sends exactly those and decides no status itself: a duplicate
   gets 200 with the result stored by the first completion (so a
   redelivery, or a signed body re-sent under a new delivery id, gets the
   first answer), an in-flight copy 503 with Retry-After, a bad signature
   401, ... (examples/README.md has the table; webhook_dedup.http_answer
   gives the same answers by name). Only claimed / reclaimed leave the work
   to us: do it (step 4), then answer http_status and http_headers with
   our own result as the body.
   A copy that arrives while another worker holds the key first waits, up
   to --wait (default: the provider's, 8 s for GitHub), for that worker to
   finish, and is then answered as the duplicate it became.
4. Do the work in steps, each exactly-once. A step commits its own writes and
   its record in webhook_dedup in ONE transaction:
   a. the notification, unless the claim's last_step is already 'notified':
       BEGIN; INSERT INTO demo.notifications ...;
              SELECT webhook_dedup.webhook_checkpoint('github', key, claim_token, 'notified');
       COMMIT   -- or ROLLBACK when webhook_checkpoint returns false
   b. the side effect and the completion:
       BEGIN; INSERT ... side effect ...;
              SELECT webhook_dedup.webhook_complete('github', key, claim_token, result);
       COMMIT   -- or ROLLBACK when webhook_complete returns false
   Both return false when our lease expired and another worker reclaimed the
   key; the step then belongs to that worker, and rolling back keeps it
   exactly-once. The answer is then webhook_dedup.http_answer('lease_lost',
   'github'): 503, and the provider's retry gets that worker's answer.
   If this process dies, whatever it had not committed is gone, the lease
   expires, and the provider's retry reclaims the key with last_step = the
   last checkpoint: it skips the steps already done and resumes there.
   The checkpoint sits in its step's own transaction because anywhere else a
   crash breaks exactly-once: committed after the step, a crash between the
   two makes the reclaim redo the step (twice); committed before it, a crash
   between the two makes the reclaim skip a step that never happened (never).
   In one transaction the step and its checkpoint commit together or not at
   all, and since webhook_checkpoint holds the key's row lock until then, a
   concurrent reclaim waits and sees both or neither, never one alone.

A database error is answered 500 with webhook_dedup.http_answer('error'),
read once at start-up (the database cannot be asked when it fails).

Every answer carries an `X-Webhook-Outcome` header with the claim outcome, and
an answer that resumed from a checkpoint an `X-Webhook-Resumed-From` header
with that step; they are not needed by the pattern, they only let the demo
provider and the tests see what happened.

Run (libpq environment variables select the database unless --dsn is given),
as a role that may only call the receiver functions (roles.sql sets one up):
    psql -X -v ON_ERROR_STOP=1 -f roles.sql   # as a superuser, after CREATE EXTENSION webhook_dedup
    WEBHOOK_SECRET=... python3 receiver.py --port 8080 --lease '30 seconds' --dsn 'user=demo_receiver'
(--wait '2 seconds' overrides the provider's wait for an in-flight copy,
also read from WEBHOOK_WAIT; '0' answers it at once.)

This is an example: it opens one database connection per request for
simplicity; a production receiver would use a connection pool.
"""

import argparse
import json
import os
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple, NoReturn, Optional

import psycopg
from psycopg.rows import namedtuple_row
from psycopg.types.json import Jsonb

SOURCE = "github"
PATH = "/webhooks/github"
# GitHub caps payloads at 25 MB; refuse anything larger before reading it.
MAX_BODY_BYTES = 25 * 1024 * 1024
FAULT_HEADER = "X-Demo-Fault"
CRASH_AFTER_CLAIM = "crash-after-claim"
CRASH_AFTER_CHECKPOINT = "crash-after-checkpoint"
# A slow job: sleep this long after step 4a, before step 4b (the holder a
# concurrent copy waits for).
SLOW = "slow"
SLOW_SECONDS = 3
NOTIFIED = "notified"  # the checkpoint of step 4a

DEMO_SCHEMA = """
-- Deliberately NOT unique on idem_key: exactly-once must come from
-- webhook_dedup's claim protocol, not from a constraint on the side effect.
CREATE TABLE IF NOT EXISTS demo.side_effects (
    id          bigserial PRIMARY KEY,
    idem_key    text NOT NULL,
    delivery_id text NOT NULL,
    event_type  text,  -- X-GitHub-Event; NULL when a sender leaves it out
    attempt     int NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- Step 4a's output, not unique either: its checkpoint makes it exactly-once.
CREATE TABLE IF NOT EXISTS demo.notifications (
    id          bigserial PRIMARY KEY,
    idem_key    text NOT NULL,
    delivery_id text NOT NULL,
    attempt     int NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""


class Response(NamedTuple):
    status: int
    headers: dict  # header name -> value, Content-Type included
    body: object  # sent as JSON
    outcome: Optional[str] = None
    resumed_from: Optional[str] = None  # the checkpoint this answer resumed from


JSON_HEADERS = {"Content-Type": "application/json"}


class Config(NamedTuple):
    dsn: str
    secrets: list
    lease: Optional[str]  # Postgres interval text; None = the extension's default
    wait: Optional[str]  # Postgres interval text; None = the provider's default
    fault_injection: bool
    error_answer: Response  # webhook_dedup.http_answer('error'), read at start-up


class Crash(Exception):
    """Raised by the fault injection, with the fault's name: the handler must answer nothing."""


def headers_json(headers) -> dict:
    """Request headers as the JSON object webhook_verify expects.

    Names are lower-cased (HTTP names are case-insensitive); a name sent more
    than once becomes an array of its values, in order.
    """
    grouped = {}
    for name, value in headers.items():
        grouped.setdefault(name.lower(), []).append(value)
    return {name: values[0] if len(values) == 1 else values for name, values in grouped.items()}


def answer_of(row, outcome: Optional[str], body=None, resumed_from: Optional[str] = None) -> Response:
    """The answer the database computed: `row`'s http_status, http_headers
    and response (or `body`, our own result after the work)."""
    return Response(row.http_status, row.http_headers, row.response if body is None else body,
                    outcome, resumed_from)


def insert_notification(conn, key: str, delivery_id: str, attempt: int) -> None:
    """The output of step 4a: one row per notified delivery."""
    conn.execute(
        "INSERT INTO demo.notifications (idem_key, delivery_id, attempt) VALUES (%s, %s, %s)",
        (key, delivery_id, attempt),
    )


def insert_side_effect(conn, key: str, delivery_id: str, event_type: Optional[str], attempt: int) -> int:
    """The business side effect of this demo: one row per processed delivery."""
    return conn.execute(
        "INSERT INTO demo.side_effects (idem_key, delivery_id, event_type, attempt)"
        " VALUES (%s, %s, %s, %s) RETURNING id",
        (key, delivery_id, event_type, attempt),
    ).fetchone()[0]


def lease_lost(conn, claim) -> Response:
    """The answer when a stale claim token made us roll a step back: the
    database's answer for a lost lease (503); the provider retries and gets
    the answer of the worker that holds the key now."""
    row = conn.cursor(row_factory=namedtuple_row).execute(
        "SELECT * FROM webhook_dedup.http_answer('lease_lost', %s)", (SOURCE,)).fetchone()
    return answer_of(row, claim.outcome)


def notify(conn, key: str, delivery_id: str, claim) -> bool:
    """Step 4a: the notification and its checkpoint commit together, or not at all.

    False when the checkpoint found our lease reclaimed by another worker:
    the notification is then that worker's to send, so ours is rolled back.
    """
    with conn.transaction() as tx:
        insert_notification(conn, key, delivery_id, claim.attempt)
        # Checkpoint last: it takes the key's row lock, which concurrent claims of
        # this key then wait for until COMMIT.
        checkpointed = conn.execute(
            "SELECT webhook_dedup.webhook_checkpoint(%s, %s, %s, %s)",
            (SOURCE, key, claim.claim_token, NOTIFIED),
        ).fetchone()[0]
        if checkpointed:
            return True  # leaving the block commits
        raise psycopg.Rollback(tx)
    return False


def complete(conn, key: str, delivery_id: str, event_type: Optional[str], claim) -> Response:
    """Step 4b: side effect and completion commit together, or not at all.

    Answers the claim's http_status and http_headers with our result as the
    body, once committed: every later duplicate gets that result, stored."""
    with conn.transaction() as tx:
        side_effect_id = insert_side_effect(conn, key, delivery_id, event_type, claim.attempt)
        result = {"status": 200, "side_effect_id": side_effect_id}
        completed = conn.execute(
            "SELECT webhook_dedup.webhook_complete(%s, %s, %s, %s)",
            (SOURCE, key, claim.claim_token, Jsonb(result)),
        ).fetchone()[0]
        if completed:
            return answer_of(claim, claim.outcome, body=result)  # leaving the block commits
        # Our lease expired and another worker reclaimed the key: the side
        # effect belongs to that worker now, so ours must not be committed.
        raise psycopg.Rollback(tx)
    return lease_lost(conn, claim)


def process_claimed(conn, key: str, delivery_id: str, event_type: Optional[str], claim,
                    fault: Optional[str] = None) -> Response:
    """Step 4: a reclaim skips the step its crashed predecessor checkpointed.
    `claim` is webhook_receive's row; `fault` (tests only) is injected."""
    if claim.last_step == NOTIFIED:
        return complete(conn, key, delivery_id, event_type, claim)._replace(resumed_from=NOTIFIED)
    if not notify(conn, key, delivery_id, claim):
        return lease_lost(conn, claim)
    if fault == CRASH_AFTER_CHECKPOINT:
        die(conn, CRASH_AFTER_CHECKPOINT)
    if fault == SLOW:
        time.sleep(SLOW_SECONDS)  # holding the claim, not a lock
    return complete(conn, key, delivery_id, event_type, claim)


def crash_mid_notification(conn, key: str, delivery_id: str, claim) -> NoReturn:
    """Fault injection: die after the claim, in the middle of step 4a.

    The notification is inserted in an open transaction, then the connection
    is closed without COMMIT, exactly what the server sees when a worker
    process is killed: it rolls the transaction back, checkpoint included.
    Only the (autocommitted) claim survives, its last_step still NULL, and its
    lease must expire before the key can be reclaimed.
    """
    conn.autocommit = False
    insert_notification(conn, key, delivery_id, claim.attempt)
    die(conn, CRASH_AFTER_CLAIM)


def die(conn, fault: str) -> NoReturn:
    """Like a killed worker: drop the database connection and answer nothing."""
    conn.close()
    raise Crash(fault)


def handle_delivery(cfg: Config, body: bytes, headers) -> Response:
    """Steps 1-4 for one POST; raises Crash when the fault injection fires."""
    with psycopg.connect(cfg.dsn, autocommit=True) as conn:
        # Steps 1-3 in one round trip: verify, derive the key from GitHub's
        # profile (X-GitHub-Delivery), claim it. A delivery that does not
        # verify writes nothing.
        claim = conn.cursor(row_factory=namedtuple_row).execute(
            "SELECT * FROM webhook_dedup.webhook_receive('github', %s, %s, %s,"
            " lease => %s::interval, wait => %s::interval)",
            (body, Jsonb(headers_json(headers)), cfg.secrets, cfg.lease, cfg.wait),
        ).fetchone()
        if claim.outcome not in ("claimed", "reclaimed"):
            # Every other outcome, and every refusal, is answered as the
            # database says (its outcome is NULL for a refusal).
            return answer_of(claim, claim.outcome)
        key, delivery_id = claim.idem_key, headers.get("X-GitHub-Delivery")
        fault = headers.get(FAULT_HEADER) if cfg.fault_injection else None
        if fault == CRASH_AFTER_CLAIM:
            crash_mid_notification(conn, key, delivery_id, claim)
        return process_claimed(conn, key, delivery_id, claim.event_type, claim, fault)


class WebhookHandler(BaseHTTPRequestHandler):
    server_version = "webhook-dedup-example/1"
    config: Config  # set by make_server

    def do_POST(self):
        # Not deliveries (no outcome): plain HTTP refusals of our own.
        if self.path != PATH:
            self.send_json(Response(404, JSON_HEADERS, {"error": "not found"}))
            return
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.send_json(Response(411, JSON_HEADERS, {"error": "Content-Length required"}))
            return
        if int(length) > MAX_BODY_BYTES:
            self.send_json(Response(413, JSON_HEADERS, {"error": "payload too large"}))
            return
        body = self.rfile.read(int(length))
        try:
            response = handle_delivery(self.config, body, self.headers)
        except Crash as crash:
            # Like a killed process: close the connection, send no bytes at all.
            self.log_message("fault injection: %s, no response sent", crash)
            self.close_connection = True
            return
        except psycopg.Error as exc:
            # A provider retries a 5xx, which is what we want for a transient
            # database problem; details go to the log, not the caller.
            self.log_error("database error: %s", exc)
            response = self.config.error_answer
        self.send_json(response)

    def send_json(self, response: Response) -> None:
        # sort_keys makes a duplicate's body byte-identical to the first answer's.
        data = json.dumps(response.body, sort_keys=True).encode()
        self.send_response(response.status)
        for name, value in response.headers.items():  # Content-Type, Retry-After, ...
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        if response.outcome:
            self.send_header("X-Webhook-Outcome", response.outcome)
        if response.resumed_from:
            self.send_header("X-Webhook-Resumed-From", response.resumed_from)
        self.end_headers()
        self.wfile.write(data)


class Server(ThreadingHTTPServer):
    # The default listen backlog (5) is smaller than a burst of concurrent
    # deliveries; when it overflows, Linux drops SYNs and the client waits a
    # full second before retrying the connect.
    request_queue_size = 128


def prepare_database(dsn: str) -> Response:
    """Create the demo tables and fail fast if webhook_dedup is not
    installed; return the answer to a database error (http_answer('error'):
    when the database fails, it cannot be asked)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        # the webhook_receive with `wait` (webhook_dedup 0.2.0 and later)
        probe = ("SELECT to_regprocedure('webhook_dedup.webhook_receive(text, bytea, jsonb, text[], text, text,"
                 " text, text, text, interval, boolean, interval, timestamp with time zone, text, text, text,"
                 " text, text, text, interval)')")
        if conn.execute(probe).fetchone()[0] is None:
            sys.exit("webhook_dedup is not installed in this database (or is too old): "
                     "run CREATE EXTENSION webhook_dedup (or ALTER EXTENSION webhook_dedup UPDATE)")
        # roles.sql creates the schema for a role that may not create one
        if conn.execute("SELECT to_regnamespace('demo')").fetchone()[0] is None:
            conn.execute("CREATE SCHEMA demo")
        conn.execute(DEMO_SCHEMA)
        row = conn.cursor(row_factory=namedtuple_row).execute(
            "SELECT * FROM webhook_dedup.http_answer('error', %s)", (SOURCE,)).fetchone()
        return answer_of(row, None)


def make_server(host: str, port: int, cfg: Config) -> Server:
    handler = type("ConfiguredWebhookHandler", (WebhookHandler,), {"config": cfg})
    return Server((host, port), handler)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Example GitHub webhook receiver on webhook_dedup.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    parser.add_argument("--dsn", default="",
                        help="libpq connection string; default: PGHOST/PGPORT/... env vars")
    parser.add_argument("--secret", action="append", dest="secrets",
                        help="webhook secret; repeat during a rotation (default: $WEBHOOK_SECRET)")
    parser.add_argument("--lease", default=None,
                        help="claim lease as a Postgres interval, e.g. '30 seconds' "
                             "(default: the extension's webhook_dedup.default_lease)")
    parser.add_argument("--wait", default=os.environ.get("WEBHOOK_WAIT") or None,
                        help="how long a copy waits for the worker that holds its key, as a Postgres "
                             "interval, '0' not at all (default: $WEBHOOK_WAIT, else the provider's "
                             "default_wait in webhook_dedup.providers: 8 s for GitHub)")
    parser.add_argument("--fault-injection", action="store_true",
                        help=f"honour '{FAULT_HEADER}: {CRASH_AFTER_CLAIM}', "
                             f"'{FAULT_HEADER}: {CRASH_AFTER_CHECKPOINT}' and '{FAULT_HEADER}: {SLOW}' "
                             "(demo and tests only)")
    args = parser.parse_args(argv)
    if not args.secrets:
        env_secret = os.environ.get("WEBHOOK_SECRET")
        if not env_secret:
            parser.error("no secret: pass --secret or set WEBHOOK_SECRET")
        args.secrets = [env_secret]
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    error_answer = prepare_database(args.dsn)
    cfg = Config(args.dsn, args.secrets, args.lease, args.wait, args.fault_injection, error_answer)
    server = make_server(args.host, args.port, cfg)
    # A parent process (tests, scripts/demo.sh) reads this line to learn the port.
    print(f"listening on http://{args.host}:{server.server_address[1]}", flush=True)
    # Turn SIGTERM into a normal exit so the listening socket is closed cleanly.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
