#!/usr/bin/env python3
"""A webhook "provider" that replays real GitHub deliveries with real-world faults.

Each fixture file (tests/fixtures/github/<event>/*.json) is one event: its bytes
are POSTed, signed like GitHub signs them, with a fresh X-GitHub-Delivery. GitHub
never sends one body for two events, so each replayed event is made new by a
first member naming its delivery ("x_demo_event"); the rest is the fixture's
bytes.
A seeded RNG picks which events also suffer the faults real providers produce:

  sequential  redelivered with the same id and bytes after the first answer
  concurrent  two copies released at the same instant
  crash-after-claim
              the first attempt asks the receiver to die after its claim, in
              the middle of the notification step (X-Demo-Fault, needs
              --fault-injection on the receiver); the provider retries once the
              lease has expired, and the reclaim must redo that step
  crash-after-checkpoint
              the same, but the receiver dies right after the notification
              step committed its checkpoint: the reclaim must resume from it
              (X-Webhook-Resumed-From: notified) and not notify again
  tampered    an extra delivery with a fresh id whose body has one byte changed
              after signing: it must be refused (401) and leave no trace
  replayed    an extra delivery, sent after the others, of an event's exact
              signed bytes under a fresh id (what whoever captured a delivery
              can do, since GitHub signs no id): the replay guard must answer
              it duplicate, and it must leave no key and no side effect

Like a real provider, every delivery is retried on a 5xx (after its
Retry-After, if any: an in_progress copy's 503 says when the holder's lease
ends) and on a dropped connection, until it gets a 2xx, a 4xx (final) or runs
out of attempts. The receiver answers every outcome as webhook_receive's row
says (http_status, http_headers, response): a copy that arrives while
another holds the key waits for it and is then answered as a duplicate
(200), or 503 in_progress if the wait ends first.

Afterwards the database is checked: every valid event must have exactly one row
in demo.notifications and one in demo.side_effects, no tampered delivery may be
stored anywhere, every valid delivery must have been accepted, and the
extension's counters (webhook_dedup.duplicate_metrics) must add up to the
answers, line by line as the report prints them (reconcile: the replayed
copies are answered duplicate but counted as replayed, not as duplicates).
The exit code is non-zero otherwise.

    WEBHOOK_SECRET=... python3 replay.py --url http://127.0.0.1:8080/webhooks/github \\
        --fixtures tests/fixtures/github --lease-seconds 2

--lease-seconds must match the receiver's --lease. The database comes from the
libpq environment variables (PGHOST, PGPORT, PGUSER, PGDATABASE) or --dsn.
"""

import argparse
import email.message
import hashlib
import hmac
import json
import http.client
import os
import random
import sys
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional
from urllib.parse import urlsplit

import psycopg
from psycopg import sql

DEFAULT_SEED = 20240601
SOURCE = "github"
FAULT_HEADER = "X-Demo-Fault"
CRASH_AFTER_CLAIM = "crash-after-claim"
CRASH_AFTER_CHECKPOINT = "crash-after-checkpoint"
CRASH_KINDS = (CRASH_AFTER_CLAIM, CRASH_AFTER_CHECKPOINT)  # each kind is its fault's name
NOTIFIED = "notified"  # the receiver's checkpoint after its notification step

# Share of events given each fault. Kinds are exclusive, so one event exercises
# one fault and a failure points at it.
CRASH_RATE = 0.05  # split between the two crash kinds
CONCURRENT_RATE = 0.10
SEQUENTIAL_RATE = 0.20
TAMPERED_RATE = 0.05
REPLAYED_RATE = 0.05

KINDS = ("plain", "sequential", "concurrent", *CRASH_KINDS, "tampered", "replayed")
EXTRA_KINDS = ("tampered", "replayed")  # deliveries that are not events of their own
MAX_ATTEMPTS = 6  # per copy of a delivery, like a provider's bounded retries
HTTP_TIMEOUT_S = 10.0
# Wait before retrying an answer without Retry-After (5xx, dropped connection).
ERROR_BACKOFF_S = 0.5


@dataclass(frozen=True)
class Fixture:
    event: str  # the X-GitHub-Event value: the fixture's folder name
    path: Path
    body: bytes


@dataclass(frozen=True)
class Delivery:
    kind: str
    delivery_id: str
    event: str
    body: bytes         # the bytes sent
    signed_body: bytes  # the bytes signed: equal to body except when tampered
    fixture: Path
    replay_of: Optional[str] = None  # replayed: the delivery id whose signed bytes it re-sends


@dataclass(frozen=True)
class Answer:
    status: Optional[int]  # None: the connection closed without a response
    outcome: Optional[str]  # the receiver's X-Webhook-Outcome header
    retry_after: Optional[str]
    body: bytes
    resumed_from: Optional[str] = None  # the receiver's X-Webhook-Resumed-From header
    # every header of the answer (names case-insensitive; empty without one)
    headers: email.message.Message = field(default_factory=email.message.Message, compare=False, repr=False)

    @property
    def accepted(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass
class DeliveryResult:
    delivery: Delivery
    answers: list = field(default_factory=list)  # every Answer, each copy in order sent

    @property
    def accepted(self) -> bool:
        return any(a.accepted for a in self.answers)


@dataclass
class Report:
    requests: int
    accepted: int
    outcomes: Counter  # X-Webhook-Outcome of every answer
    resumed: int  # answers that resumed from a checkpoint
    rejected_signatures: int
    notifications_histogram: dict  # notification rows per valid event -> number of events
    side_effects_histogram: dict  # side-effect rows per valid event -> number of events
    tampered_stored: int  # tampered deliveries found in webhook_dedup.keys or a demo table
    metrics_columns: list  # webhook_dedup.duplicate_metrics, the columns shown
    metrics_rows: list
    states_rows: list  # webhook_dedup.key_states
    problems: list
    reconciliation: list = field(default_factory=list)  # Equation: the counters against the answers
    replays_refused: int = 0  # answers to replayed copies that said duplicate

    @property
    def ok(self) -> bool:
        return not self.problems


def load_fixtures(fixtures_dir) -> list:
    """Every <event>/<name>.json under fixtures_dir, as exact bytes, in a stable order."""
    paths = sorted(Path(fixtures_dir).glob("*/*.json"))
    if not paths:
        raise FileNotFoundError(f"no <event>/*.json fixtures under {fixtures_dir}")
    return [Fixture(p.parent.name, p, p.read_bytes()) for p in paths]


def sign(secret: str, body: bytes) -> str:
    """GitHub's X-Hub-Signature-256 value for body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def github_headers(delivery_id: str, event: str, signature: str) -> dict:
    return {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/demo",
        "X-GitHub-Delivery": delivery_id,
        "X-GitHub-Event": event,
        "X-Hub-Signature-256": signature,
    }


def as_new_event(body: bytes, delivery_id: str) -> bytes:
    """The fixture's bytes as the event of `delivery_id`: a first member
    "x_demo_event" naming it, then the fixture's members byte for byte."""
    start = body.index(b"{") + 1
    rest = body[start:]
    member = json.dumps({"x_demo_event": delivery_id})[1:-1].encode()
    return body[:start] + member + (b"" if rest.lstrip().startswith(b"}") else b",") + rest


def tamper(body: bytes, rng: random.Random) -> bytes:
    """body with one byte changed (flipping the low bit always changes it)."""
    i = rng.randrange(len(body))
    return body[:i] + bytes([body[i] ^ 0x01]) + body[i + 1:]


def build_plan(fixtures, seed: int = DEFAULT_SEED) -> list:
    """One Delivery per fixture plus the tampered extras, in a shuffled order.

    The seed fixes which events get which fault and the order; delivery ids are
    always fresh (uuid4) so a replay never collides with an earlier run's keys.
    """
    rng = random.Random(seed)
    events = list(fixtures)
    rng.shuffle(events)
    n = len(events)
    n_crash = max(len(CRASH_KINDS), round(n * CRASH_RATE))
    n_concurrent = max(1, round(n * CONCURRENT_RATE))
    n_sequential = max(1, round(n * SEQUENTIAL_RATE))
    bounds = [(CRASH_AFTER_CLAIM, n_crash - n_crash // 2),
              (CRASH_AFTER_CHECKPOINT, n_crash // 2),
              ("concurrent", n_concurrent), ("sequential", n_sequential)]

    plan, start = [], 0
    for kind, count in bounds:
        plan += [make_delivery(kind, f) for f in events[start:start + count]]
        start += count
    plan += [make_delivery("plain", f) for f in events[start:]]
    for f in rng.sample(events, max(1, round(n * TAMPERED_RATE))):
        plan.append(make_delivery("tampered", f, rng))
    rng.shuffle(plan)
    originals = [d for d in plan if d.kind not in EXTRA_KINDS]
    for d in rng.sample(originals, max(1, round(n * REPLAYED_RATE))):
        plan.append(replay_of(d))
    return plan


def make_delivery(kind: str, fixture: Fixture, rng: Optional[random.Random] = None) -> Delivery:
    """A new event from `fixture` (tampered after signing when kind is tampered)."""
    delivery_id = str(uuid.uuid4())
    signed = as_new_event(fixture.body, delivery_id)
    body = tamper(signed, rng or random.Random(delivery_id)) if kind == "tampered" else signed
    return Delivery(kind, delivery_id, fixture.event, body, signed, fixture.path)


def replay_of(original: Delivery) -> Delivery:
    """`original`'s exact signed bytes under a fresh delivery id."""
    return Delivery("replayed", str(uuid.uuid4()), original.event, original.signed_body, original.signed_body,
                    original.fixture, replay_of=original.delivery_id)


def post(url: str, body: bytes, headers: dict,
         barrier: Optional[threading.Barrier] = None) -> Answer:
    """POST once on a new connection. With a barrier, wait until all copies are ready."""
    parts = urlsplit(url)
    if barrier:
        barrier.wait()
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=HTTP_TIMEOUT_S)
    try:
        conn.request("POST", parts.path or "/", body=body, headers=headers)
        resp = conn.getresponse()
        return Answer(resp.status, resp.getheader("X-Webhook-Outcome"),
                      resp.getheader("Retry-After"), resp.read(),
                      resp.getheader("X-Webhook-Resumed-From"), resp.headers)
    except (OSError, http.client.HTTPException):
        # Connection refused, reset or closed before a status line: to a
        # provider this is "no response", which it retries like a timeout.
        return Answer(None, None, None, b"")
    finally:
        conn.close()


class Provider:
    """Sends deliveries to one receiver URL and retries them like a provider."""

    def __init__(self, url: str, secret: str, lease_seconds: float):
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"expected an http:// URL, got {url!r}")
        self.url = url
        self.secret = secret
        self.lease_seconds = lease_seconds

    def send(self, delivery: Delivery, fault: Optional[str] = None,
             barrier: Optional[threading.Barrier] = None) -> Answer:
        headers = github_headers(delivery.delivery_id, delivery.event,
                                 sign(self.secret, delivery.signed_body))
        if fault:
            headers[FAULT_HEADER] = fault
        return post(self.url, delivery.body, headers, barrier)

    def deliver(self, delivery: Delivery, barrier: Optional[threading.Barrier] = None) -> list:
        """Send until a 2xx or a 4xx (final), at most MAX_ATTEMPTS times."""
        answers = []
        for attempt in range(MAX_ATTEMPTS):
            answer = self.send(delivery, barrier=barrier if attempt == 0 else None)
            answers.append(answer)
            if answer.accepted or (answer.status is not None and 400 <= answer.status < 500):
                break
            time.sleep(retry_delay(answer))
        return answers

    def replay(self, delivery: Delivery) -> DeliveryResult:
        """Play one planned delivery with its fault."""
        result = DeliveryResult(delivery)
        if delivery.kind == "tampered":
            # A forged request is not retried: 401 is the final answer.
            result.answers.append(self.send(delivery))
        elif delivery.kind in CRASH_KINDS:
            result.answers.append(self.send(delivery, fault=delivery.kind))
            time.sleep(self.lease_seconds + 1.0)
            result.answers += self.deliver(delivery)
        elif delivery.kind == "concurrent":
            result.answers += self._concurrent_copies(delivery)
        else:
            result.answers += self.deliver(delivery)
            if delivery.kind == "sequential":
                result.answers += self.deliver(delivery)
        return result

    def _concurrent_copies(self, delivery: Delivery) -> list:
        barrier = threading.Barrier(2)
        copies = [[], []]

        def copy(i):
            copies[i] = self.deliver(delivery, barrier)

        threads = [threading.Thread(target=copy, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return copies[0] + copies[1]


def retry_delay(answer: Answer) -> float:
    """Seconds to wait before the next attempt: the receiver's Retry-After if any."""
    if answer.retry_after and answer.retry_after.isdigit():
        return float(answer.retry_after)
    return ERROR_BACKOFF_S


def run(plan, url: str, secret: str, lease_seconds: float, workers: int = 8) -> list:
    """Replay the whole plan with `workers` deliveries in flight, the
    replayed copies once every event was delivered; one result per delivery."""
    provider = Provider(url, secret, lease_seconds)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        events = list(pool.map(provider.replay, [d for d in plan if d.kind != "replayed"]))
        return events + list(pool.map(provider.replay, [d for d in plan if d.kind == "replayed"]))


def check(conn, results, metrics_before=None) -> Report:
    """Compare what the provider saw with what the database holds;
    `metrics_before` is metrics_totals() from before the run (zeros when
    the database saw no deliveries of SOURCE before)."""
    answers = [a for r in results for a in r.answers]
    valid = [r for r in results if r.delivery.kind not in EXTRA_KINDS]
    tampered = [r for r in results if r.delivery.kind == "tampered"]
    replayed = [r for r in results if r.delivery.kind == "replayed"]
    problems = []

    valid_ids = [r.delivery.delivery_id for r in valid]
    notifications = _row_counts(conn, "notifications", valid_ids)
    side_effects = _row_counts(conn, "side_effects", valid_ids)
    keys = _key_states(conn, [r.delivery.delivery_id for r in results])
    for r in valid:
        delivery_id = r.delivery.delivery_id
        problems += _valid_problems(r, notifications[delivery_id], side_effects[delivery_id],
                                    keys[delivery_id])
    tampered_ids = [r.delivery.delivery_id for r in tampered]
    tampered_rows = (_row_counts(conn, "notifications", tampered_ids),
                     _row_counts(conn, "side_effects", tampered_ids))
    tampered_stored = 0
    for r in tampered:
        d = r.delivery
        if [a.status for a in r.answers] != [401]:
            problems.append(f"tampered {d.delivery_id}: answers {[a.status for a in r.answers]}, "
                            "expected [401]")
        if keys[d.delivery_id] is not None or any(rows[d.delivery_id] for rows in tampered_rows):
            tampered_stored += 1
            problems.append(f"tampered {d.delivery_id} was stored")

    replayed_rows = (_row_counts(conn, "notifications", [r.delivery.delivery_id for r in replayed]),
                     _row_counts(conn, "side_effects", [r.delivery.delivery_id for r in replayed]))
    for r in replayed:
        d = r.delivery
        final = r.answers[-1] if r.answers else None
        if final is None or (final.status, final.outcome) != (200, "duplicate"):
            problems.append(f"replayed {d.delivery_id} (of {d.replay_of}): final answer "
                            f"{final and (final.status, final.outcome)}, expected (200, 'duplicate')")
        if keys[d.delivery_id] is not None or any(rows[d.delivery_id] for rows in replayed_rows):
            problems.append(f"replayed {d.delivery_id} (of {d.replay_of}) was stored or processed")

    replay_answers = [a for r in replayed for a in r.answers]
    counted = counted_since(conn, metrics_before)
    reconciliation = reconcile(answers, replay_answers, counted)
    problems += [f"webhook_dedup.duplicate_metrics does not add up: {e}" for e in reconciliation if not e.holds]
    cur = conn.execute(f"SELECT {', '.join(METRICS_SHOWN)} FROM webhook_dedup.duplicate_metrics"
                       " ORDER BY source, bucket")
    metrics_columns, metrics_rows = [c.name for c in cur.description], cur.fetchall()
    states_rows = conn.execute("SELECT source, state, keys FROM webhook_dedup.key_states"
                               " ORDER BY source, state").fetchall()
    return Report(
        requests=len(answers),
        accepted=sum(a.accepted for a in answers),
        outcomes=Counter(a.outcome for a in answers if a.outcome),
        resumed=sum(a.resumed_from is not None for a in answers),
        rejected_signatures=sum(a.status == 401 for a in answers),
        notifications_histogram=dict(Counter(notifications.values())),
        side_effects_histogram=dict(Counter(side_effects.values())),
        tampered_stored=tampered_stored,
        metrics_columns=metrics_columns,
        metrics_rows=metrics_rows,
        states_rows=states_rows,
        problems=problems,
        reconciliation=reconciliation,
        replays_refused=sum(a.outcome == "duplicate" for a in replay_answers),
    )


METRICS_SHOWN = ("source", "bucket", "deliveries", "first_claims", "reclaims", "duplicates",
                 "duplicates_in_progress", "conflicts", "completions", "signature_rejections", "replayed",
                 "duplicate_ratio")


METRICS_TOTALS = ("deliveries", "first_claims", "reclaims", "duplicates", "signature_rejections", "replayed")


def metrics_totals(conn) -> tuple:
    """SOURCE's totals of METRICS_TOTALS in webhook_dedup.duplicate_metrics
    (flushed plus live counts). A flush by the maintenance worker hides the
    counts it moves until its transaction commits, so the totals are read
    only while the worker (if any) stays out of a transaction, with no pass
    reported in between (its state does not change), from before the read
    to after it."""
    query = ("SELECT " + ", ".join(f"coalesce(sum({c}), 0)" for c in METRICS_TOTALS)
             + " FROM webhook_dedup.duplicate_metrics WHERE source = %s")
    worker = ("SELECT xact_start, state, state_change FROM pg_stat_activity"
              " WHERE backend_type = 'webhook_dedup maintenance'")
    for _ in range(100):
        before = conn.execute(worker).fetchall()
        row = tuple(conn.execute(query, (SOURCE,)).fetchone())
        if before == conn.execute(worker).fetchall() and all(xact is None for xact, _, _ in before):
            return row
        time.sleep(0.05)
    raise RuntimeError("the maintenance worker never stayed out of a transaction for a read of the metrics")


def counted_since(conn, before=None) -> dict:
    """SOURCE's METRICS_TOTALS counted since `before` (metrics_totals()
    from before the run; None: since the counters started), by name."""
    before = before or (0,) * len(METRICS_TOTALS)
    return {name: now - then for name, now, then in zip(METRICS_TOTALS, metrics_totals(conn), before)}


@dataclass(frozen=True)
class Equation:
    """A number the receiver's answers show (left) and the counters that
    must add up to it (right), each with what it counts."""
    left: tuple   # (number, what)
    right: tuple  # ((number, what), ...)

    @property
    def holds(self) -> bool:
        return self.left[0] == sum(n for n, _ in self.right)

    def __str__(self) -> str:
        terms = " + ".join(f"{n} {what}" for n, what in self.right)
        return f"{self.left[0]} {self.left[1]} {'=' if self.holds else '!='} {terms}"


def reconcile(answers, replay_answers, counted: dict) -> list:
    """The extension's counters (`counted`: webhook_dedup.duplicate_metrics,
    live plus flushed, this run's increments by METRICS_TOTALS name) against
    every answer the receiver gave (`answers`; `replay_answers`: those to
    the replayed copies), as equations that must all hold:

    - every request is one webhook_receive call, counted once: as a
      delivery, a signature rejection, or a replay (a replayed copy refused
      by the replay guard, which is neither a delivery nor a duplicate). A
      crashed attempt answers nothing, but it was counted as the delivery it
      claimed;
    - every 401 is a counted signature rejection, every replayed copy a
      counted replay;
    - every answer `duplicate` or `in_progress` (`duplicates` counts both)
      is a counted duplicate, or a replayed copy: the replay guard answers
      it `duplicate` too, but counts it under `replayed`. So the duplicates
      the receiver answered are more than the counter's, by the replays.
    """
    outcomes = Counter(a.outcome for a in answers if a.outcome)
    return [
        Equation((len(answers), "requests (webhook_receive calls)"),
                 ((counted["deliveries"], "counted deliveries"),
                  (counted["signature_rejections"], "signature rejections"),
                  (counted["replayed"], "replays"))),
        Equation((sum(a.status == 401 for a in answers), "answered 401"),
                 ((counted["signature_rejections"], "counted signature rejections"),)),
        Equation((len(replay_answers), "replayed copies sent"), ((counted["replayed"], "counted replays"),)),
        Equation((outcomes["duplicate"] + outcomes["in_progress"], "answered duplicate or in_progress"),
                 ((counted["duplicates"], "counted duplicates"),
                  (counted["replayed"], "refused as replays (answered duplicate, counted as replayed)"))),
    ]


def _valid_problems(r: DeliveryResult, notifications: int, side_effects: int, key) -> list:
    """What is wrong with one valid delivery, given its row counts and key row."""
    d, problems = r.delivery, []
    where = f"{d.kind} {d.delivery_id} ({d.fixture.parent.name}/{d.fixture.name})"
    if notifications != 1:
        problems.append(f"{where}: {notifications} notifications, expected exactly 1")
    if side_effects != 1:
        problems.append(f"{where}: {side_effects} side effects, expected exactly 1")
    if not r.accepted:
        problems.append(f"{where}: never accepted, answers {[a.status for a in r.answers]}")
    if key is None or key[0] != "completed":
        problems.append(f"{where}: key is {key}, expected completed")
    bodies = {a.body for a in r.answers if a.accepted}
    if len(bodies) > 1:
        problems.append(f"{where}: redeliveries got different answers {sorted(bodies)}")
    if d.kind in CRASH_KINDS:
        problems += _crash_problems(r, key, where)
    return problems


def _crash_problems(r: DeliveryResult, key, where: str) -> list:
    """A crash delivery must be answered by no one, then reclaimed, and resume
    from the checkpoint when the crash came after it."""
    problems = []
    if r.answers[0].status is not None:
        problems.append(f"{where}: the crash attempt got answer {r.answers[0].status}"
                        " (is the receiver running with --fault-injection?)")
    if "reclaimed" not in [a.outcome for a in r.answers] or key is None or key[1] != 2:
        problems.append(f"{where}: not reclaimed once after the crash (key {key})")
    final = r.answers[-1]
    if r.delivery.kind == CRASH_AFTER_CHECKPOINT and final.resumed_from != NOTIFIED:
        problems.append(f"{where}: the final answer resumed from {final.resumed_from!r},"
                        f" expected {NOTIFIED!r}")
    return problems


def _row_counts(conn, table: str, delivery_ids) -> dict:
    """delivery id -> number of its rows in demo.<table>."""
    query = sql.SQL(
        "SELECT d.id, count(t.id) FROM unnest(%s::text[]) AS d(id)"
        " LEFT JOIN {} t ON t.delivery_id = d.id GROUP BY d.id"
    ).format(sql.Identifier("demo", table))
    return dict(conn.execute(query, (delivery_ids,)).fetchall())


def _key_states(conn, delivery_ids) -> dict:
    """delivery id -> (state, attempt) of its webhook_dedup key, or None if never stored."""
    rows = conn.execute(
        "SELECT d.id, k.state, k.attempt FROM unnest(%s::text[]) AS d(id)"
        " LEFT JOIN webhook_dedup.keys k"
        "   ON k.source = %s AND k.idem_key = webhook_dedup.webhook_key(%s, d.id)",
        (delivery_ids, SOURCE, SOURCE),
    ).fetchall()
    return {i: (state, attempt) if state is not None else None for i, state, attempt in rows}


def format_report(report: Report, plan) -> str:
    kinds = Counter(d.kind for d in plan)
    absorbed = report.outcomes["duplicate"] + report.outcomes["in_progress"]
    lines = [
        "replayed " + ", ".join(f"{kinds[k]} {k}" for k in KINDS),
        f"deliveries sent:            {report.requests}",
        f"accepted (2xx):             {report.accepted}",
        f"duplicates absorbed:        {absorbed} (duplicate {report.outcomes['duplicate']},"
        f" in_progress {report.outcomes['in_progress']}; {report.replays_refused} of them replayed copies"
        " refused by the replay guard)",
        f"rejected signatures (401):  {report.rejected_signatures}",
        f"reclaimed after a crash:    {report.outcomes['reclaimed']}",
        f"resumed from a checkpoint:  {report.resumed}",
        f"notifications per event:    {report.notifications_histogram}",
        f"side effects per event:     {report.side_effects_histogram}",
        f"tampered deliveries stored: {report.tampered_stored}",
        "",
        "webhook_dedup.duplicate_metrics (the extension's counters):",
        format_table(report.metrics_columns, report.metrics_rows),
        "",
        "the counters against the answers above (this run's increments; each line must add up):",
        *(f"  {e}" + ("" if e.holds else "   <- does not add up") for e in report.reconciliation),
        "",
        "webhook_dedup.key_states:",
        format_table(["source", "state", "keys"], report.states_rows),
        "",
    ]
    if report.ok:
        lines.append("OK: exactly one notification and one side effect per valid event,"
                     " every forgery refused, every replayed copy answered duplicate")
    else:
        lines.append(f"FAILED: {len(report.problems)} problem(s)")
        lines += ["  " + p for p in report.problems]
    return "\n".join(lines)


def format_table(columns, rows) -> str:
    def cell(v):
        if isinstance(v, float):
            return f"{v:.3f}"
        if hasattr(v, "strftime"):
            return v.strftime("%Y-%m-%d %H:%M%z")
        return str(v)

    cells = [columns] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    out = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
    out.insert(1, "  ".join("-" * w for w in widths))
    if not rows:
        out.append("(no rows)")
    return "\n".join(out)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Replay GitHub fixtures against a receiver, "
                                                 "with faults, and check exactly-once.")
    parser.add_argument("--url", required=True, help="e.g. http://127.0.0.1:8080/webhooks/github")
    parser.add_argument("--fixtures", default="tests/fixtures/github")
    parser.add_argument("--secret", default=os.environ.get("WEBHOOK_SECRET"),
                        help="signing secret (default: $WEBHOOK_SECRET)")
    parser.add_argument("--lease-seconds", type=float, required=True,
                        help="the receiver's claim lease, in seconds")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--dsn", default="",
                        help="libpq connection string; default: PGHOST/PGPORT/... env vars")
    args = parser.parse_args(argv)
    if not args.secret:
        parser.error("no secret: pass --secret or set WEBHOOK_SECRET")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    plan = build_plan(load_fixtures(args.fixtures), args.seed)
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        before = metrics_totals(conn)
    started = time.monotonic()
    results = run(plan, args.url, args.secret, args.lease_seconds, args.workers)
    elapsed = time.monotonic() - started
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        report = check(conn, results, before)
    print(f"replay took {elapsed:.1f}s with {args.workers} workers, seed {args.seed}")
    print(format_report(report, plan))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
