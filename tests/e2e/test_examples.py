"""Every example receiver (examples/README.md) over real HTTP against the real extension.

The same scenarios run against each stack (FastAPI, Django, Express, Hono,
Next.js, Sinatra): a
sequential duplicate, concurrent copies, a process that dies after its claim
and one that dies after its first step (each restarted, as a supervisor
would), a stale event under the monotonic guard, tampered and unsigned
bodies, a receiver started where it cannot serve (no extension, no
database, a role without webhook_dedup_receiver: one line, no traceback);
and, for the worker variant, deliveries stored by the receiver and drained
by two workers, one of which dies mid-job, and events applied with the time
the worker reads from their body; and each stack's outbox sender delivering
the job's notification to a notification service on loopback, killed
before and after its call. Every valid event must
have exactly one notification intent and one side effect, and each
notification must be performed once. Every answer must be the one the database
computed (webhook_dedup.http_answer: status, headers, body), for every
outcome a receiver can meet: a copy in flight that waits for its slow holder
and gets the first answer, or 503 with Retry-After when its wait ends first,
a conflict, keys failed or parked by their holder, a database error.
Deliveries are signed as the providers sign them
(examples/replay/deliveries.py) with the keys stored in the database, so the
receivers hold no secret.
"""

import base64
import json
import os
import random
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import pytest

from support import FIXTURES, LEFT_BY_THE_HOLDER, REPO, assert_database_answer  # also puts examples/ on sys.path

import deliveries
from downstream import Downstream
from example_apps import APPS, Process, Receiver, free_port
from replay import FAULT_HEADER, post, tamper

SECRETS = {
    "github": "e2e-examples-github-secret",
    "stripe": "whsec_e2e_examples_stripe",
    "standard": "whsec_" + base64.b64encode(b"e2e-examples-standard-webhooks-k").decode(),
}
# Long enough for a crashed receiver to be restarted (its runtime and framework
# loaded: about 0.5 s for FastAPI, more on a busy machine) and still find the
# key in_progress; every wait for an expiry waits this long.
LEASE_SECONDS = 2
# The slow fault (X-Demo-Fault: slow) sleeps this long between the job's
# steps in every app (SLOW_SECONDS in job.py, job.js, shop.rb); its holder
# runs with a lease far longer, so that no copy reclaims the key meanwhile.
SLOW_SECONDS = 3
SLOW_JOB_FILES = {"fastapi": "job.py", "django": "shop/job.py", "express": "job.js", "hono": "../express/job.js",
                  "nextjs": "../express/job.js", "sinatra": "shop.rb"}
SLOW_LEASE_SECONDS = 30
CHECKPOINT_DEADLINE_S = 15
PUSH = (FIXTURES / "push" / "payload.json").read_bytes()
WORKER_DEADLINE_S = 30
# A receiver that cannot serve must say so and exit within this (FastAPI's pool
# used to retry a missing database for 30 s; a missing extension, forever).
REFUSAL_DEADLINE_S = 15
NO_EXTENSION_DB = "examples_without_webhook_dedup"
NO_GRANT_ROLE = "examples_without_receiver_role"


class Shop:
    """What the example receivers left in the database (read as the superuser)."""

    def __init__(self, conn):
        self.conn = conn

    def key(self, d: deliveries.Delivery):
        """(state, attempt) of the delivery's key, or None if nothing was stored."""
        return self.conn.execute(
            "SELECT state, attempt FROM webhook_dedup.keys"
            " WHERE source = %s AND idem_key = webhook_dedup.webhook_key(%s, %s)",
            (d.provider, d.provider, d.event_id)).fetchone()

    def attempts(self, step: str, d: deliveries.Delivery) -> list:
        """The claim attempt that committed each of the delivery's rows of a
        step, oldest first: its notifications (step 1: outbox intents of
        operation 'notify', by the attempt of the lease that wrote them) or
        its rows of shop.side_effects (step 2)."""
        if step == "notifications":
            sql = ("SELECT key_attempt FROM webhook_dedup.outbox WHERE source = %s"
                   " AND idem_key = webhook_dedup.webhook_key(%s, %s) AND operation = 'notify' ORDER BY id")
        else:
            assert step == "side_effects"
            sql = ("SELECT attempt FROM shop.side_effects WHERE source = %s"
                   " AND idem_key = webhook_dedup.webhook_key(%s, %s) ORDER BY id")
        return [attempt for (attempt,) in self.conn.execute(sql, (d.provider, d.provider, d.event_id)).fetchall()]

    def intent(self, d: deliveries.Delivery):
        """(state, attempt, downstream_key, response) of the delivery's notification intent."""
        return self.conn.execute(
            "SELECT state, attempt, downstream_key, response FROM webhook_dedup.outbox WHERE source = %s"
            " AND idem_key = webhook_dedup.webhook_key(%s, %s) AND operation = 'notify'",
            (d.provider, d.provider, d.event_id)).fetchone()

    def exactly_once(self, d: deliveries.Delivery) -> tuple:
        return self.attempts("notifications", d), self.attempts("side_effects", d)

    def last_step(self, d: deliveries.Delivery):
        row = self.conn.execute(
            "SELECT last_step FROM webhook_dedup.keys WHERE source = %s AND idem_key = webhook_dedup.webhook_key(%s, %s)",
            (d.provider, d.provider, d.event_id)).fetchone()
        return row and row[0]

    def subject(self, provider: str, subject: str):
        return self.conn.execute(
            "SELECT last_event_type FROM shop.subjects WHERE source = %s AND subject = %s",
            (provider, subject)).fetchone()

    def subject_updated_at(self, provider: str, subject: str):
        """The event time stored with the subject's latest event (None if no row)."""
        row = self.conn.execute(
            "SELECT source_updated_at FROM shop.subjects WHERE source = %s AND subject = %s",
            (provider, subject)).fetchone()
        return row and row[0]


@pytest.fixture(scope="session")
def shop(db_conn) -> Shop:
    """examples/shop/setup.sql applied and each provider's key stored, as the README says."""
    db_conn.execute((REPO / "examples" / "shop" / "setup.sql").read_text())
    for provider, secret in SECRETS.items():
        db_conn.execute("SELECT webhook_dedup.add_secret(%s, %s, note => 'tests/e2e/test_examples.py')",
                        (provider, secret))
    return Shop(db_conn)


@pytest.fixture(scope="session")
def database_without_the_extension(db_conn) -> str:
    """A database of the cluster where webhook_dedup is not installed."""
    db_conn.execute(f"DROP DATABASE IF EXISTS {NO_EXTENSION_DB} WITH (FORCE)")
    db_conn.execute(f"CREATE DATABASE {NO_EXTENSION_DB}")
    yield NO_EXTENSION_DB
    db_conn.execute(f"DROP DATABASE IF EXISTS {NO_EXTENSION_DB} WITH (FORCE)")


@pytest.fixture(scope="module", params=sorted(APPS))
def app(request):
    app = APPS[request.param]
    if app.missing():
        pytest.fail(f"{app.name}: {', '.join(app.missing())} not on PATH (scripts/lib.sh installs it)",
                    pytrace=False)
    return app


@pytest.fixture(scope="module")
def app_env(shop) -> dict:
    """The environment of examples/README.md: libpq variables, the receiver's
    role, a short lease, no wait for a copy in flight (WEBHOOK_WAIT=0: it is
    answered in_progress at once, so the tests see it before the lease
    expires)."""
    return {**os.environ, "PGUSER": "shop_receiver", "WEBHOOK_LEASE": f"{LEASE_SECONDS} second",
            "WEBHOOK_WAIT": "0", "WEBHOOK_FAULT_INJECTION": "1"}


@pytest.fixture(scope="module")
def receiver(app, app_env, tmp_path_factory):
    r = Receiver(app, app_env, tmp_path_factory.mktemp(app.name) / "receiver.log").start()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def patient_receiver(app, app_env, tmp_path_factory):
    """A receiver with a long lease and WEBHOOK_WAIT unset: a copy in flight
    waits as long as the provider's default (GitHub: 8 s)."""
    env = {k: v for k, v in app_env.items() if k != "WEBHOOK_WAIT"}
    r = Receiver(app, {**env, "WEBHOOK_LEASE": f"{SLOW_LEASE_SECONDS} seconds"},
                 tmp_path_factory.mktemp(app.name) / "patient.log").start()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def impatient_receiver(app, app_env, tmp_path_factory):
    """A receiver whose copies in flight wait half a second at most."""
    r = Receiver(app, {**app_env, "WEBHOOK_LEASE": f"{SLOW_LEASE_SECONDS} seconds", "WEBHOOK_WAIT": "0.5 seconds"},
                 tmp_path_factory.mktemp(app.name) / "impatient.log").start()
    yield r
    r.stop()


@pytest.fixture()
def enqueuing_receiver(app, app_env, tmp_path):
    r = Receiver(app, {**app_env, "WEBHOOK_MODE": "enqueue"}, tmp_path / "enqueue.log").start()
    yield r
    r.stop()


@pytest.fixture()
def workers(app, app_env, tmp_path):
    """Starts workers of the app on demand; stops them all afterwards."""
    started = []

    def start(**env) -> Process:
        log = tmp_path / f"worker{len(started)}.log"
        started.append(Process(app.worker, app.folder, {**app_env, **env}, log).start())
        return started[-1]

    yield start
    for w in started:
        w.stop()


def send(receiver: Receiver, d: deliveries.Delivery, barrier=None, **extra_headers):
    return post(f"{receiver.url}/webhooks/{d.provider}", d.body, {**d.headers, **extra_headers}, barrier)


def github_push() -> deliveries.Delivery:
    return deliveries.github(PUSH, "push", SECRETS["github"])


def stripe_event(shop: Shop, event_type="payment_intent.succeeded", intent=None, created=None):
    return deliveries.stripe(shop.conn, SECRETS["stripe"], event_type, intent or f"pi_{uuid.uuid4().hex[:16]}",
                             created or int(time.time()))


def standard_event(shop: Shop, event_type="invoice.paid"):
    return deliveries.standard(shop.conn, SECRETS["standard"], event_type, f"inv_{uuid.uuid4().hex[:12]}")


def wait_for_checkpoint(shop: Shop, d: deliveries.Delivery) -> None:
    """Until the delivery's first step committed (a slow holder then sleeps)."""
    deadline = time.monotonic() + CHECKPOINT_DEADLINE_S
    while time.monotonic() < deadline:
        if shop.last_step(d) == "notified":
            return
        time.sleep(0.05)
    pytest.fail(f"the holder of {d.event_id} did not checkpoint within {CHECKPOINT_DEADLINE_S} s")


def wait_until_lease_expired(since: float) -> None:
    time.sleep(max(0.0, since + LEASE_SECONDS + 0.5 - time.monotonic()))


def wait_for_state(shop: Shop, d: deliveries.Delivery, state: str, workers_=()) -> None:
    deadline = time.monotonic() + WORKER_DEADLINE_S
    while time.monotonic() < deadline:
        if shop.key(d) and shop.key(d)[0] == state:
            return
        time.sleep(0.1)
    logs = "\n".join(w.output() for w in workers_)
    pytest.fail(f"key of {d.event_id} is {shop.key(d)}, not {state}, after {WORKER_DEADLINE_S} s; "
                f"worker output:\n{logs}", pytrace=False)


@pytest.mark.parametrize("make", [github_push, stripe_event, standard_event], ids=["github", "stripe", "standard"])
def test_sequential_duplicate_gets_the_first_answer_and_no_second_side_effect(receiver, shop, make):
    d = make() if make is github_push else make(shop)

    first = send(receiver, d)
    second = send(receiver, d)

    assert (first.status, first.outcome) == (200, "claimed"), first
    assert (second.status, second.outcome) == (200, "duplicate"), second
    assert second.body == first.body
    assert_database_answer(shop.conn, first, "claimed", d.provider, body=json.loads(first.body))
    assert_database_answer(shop.conn, second, "duplicate", d.provider, body=json.loads(first.body))
    assert shop.exactly_once(d) == ([1], [1])
    assert shop.key(d) == ("completed", 1)


def test_concurrent_copies_process_once(receiver, shop):
    d = stripe_event(shop)
    barrier = threading.Barrier(2)
    with ThreadPoolExecutor(max_workers=2) as pool:
        copies = list(pool.map(lambda _: send(receiver, d, barrier), range(2)))

    winners = [a for a in copies if a.outcome == "claimed"]
    assert len(winners) == 1 and winners[0].status == 200, copies
    loser = next(a for a in copies if a is not winners[0])
    assert (loser.status, loser.outcome) in {(503, "in_progress"), (200, "duplicate")}, loser
    if loser.status == 503:
        assert_database_answer(shop.conn, loser, "in_progress", "stripe", retry_after_max=LEASE_SECONDS)
    retry = send(receiver, d)
    assert (retry.status, retry.outcome, retry.body) == (200, "duplicate", winners[0].body)
    assert shop.exactly_once(d) == ([1], [1])


def test_a_receiver_killed_after_its_claim_is_redone_by_the_retry(receiver, shop):
    d = github_push()

    crashed = send(receiver, d, **{FAULT_HEADER: "crash-after-claim"})
    crashed_at = time.monotonic()
    receiver.restart_after_crash()

    assert crashed.status is None  # no answer at all
    assert shop.key(d) == ("processing", 1)
    assert shop.exactly_once(d) == ([], [])  # the uncommitted notification died with the process
    early = send(receiver, d)
    # 503 with Retry-After: the seconds left on the dead holder's lease
    assert (early.status, early.outcome) == (503, "in_progress"), early
    assert_database_answer(shop.conn, early, "in_progress", retry_after_max=LEASE_SECONDS)
    wait_until_lease_expired(crashed_at)
    late = send(receiver, d)
    assert (late.status, late.outcome, late.resumed_from) == (200, "reclaimed", None)
    assert shop.exactly_once(d) == ([2], [2])
    assert shop.key(d) == ("completed", 2)


def test_a_receiver_killed_after_its_first_step_resumes_from_the_checkpoint(receiver, shop):
    d = standard_event(shop)

    crashed = send(receiver, d, **{FAULT_HEADER: "crash-after-checkpoint"})
    crashed_at = time.monotonic()
    receiver.restart_after_crash()

    assert crashed.status is None
    assert shop.exactly_once(d) == ([1], [])  # step 1 committed with its checkpoint
    wait_until_lease_expired(crashed_at)
    late = send(receiver, d)
    assert (late.status, late.outcome, late.resumed_from) == (200, "reclaimed", "notified")
    assert shop.exactly_once(d) == ([1], [2])  # not notified twice
    assert shop.key(d) == ("completed", 2)


def test_a_stale_event_is_processed_but_does_not_move_its_subject_back(receiver, shop):
    """payment_failed (created t+3) is applied; the older processing (t+1),
    retried late by Stripe, is a new event (claimed, one side effect) whose
    update of the intent the monotonic guard skips."""
    intent, t = f"pi_{uuid.uuid4().hex[:16]}", int(time.time()) - 60
    newer = stripe_event(shop, "payment_intent.payment_failed", intent, created=t + 3)
    older = stripe_event(shop, "payment_intent.processing", intent, created=t + 1)

    assert (send(receiver, newer).status, send(receiver, older).status) == (200, 200)

    assert shop.subject("stripe", intent) == ("payment_intent.payment_failed",)
    assert shop.exactly_once(newer) == ([1], [1]) and shop.exactly_once(older) == ([1], [1])
    newest = stripe_event(shop, "payment_intent.succeeded", intent, created=t + 5)
    assert send(receiver, newest).status == 200
    assert shop.subject("stripe", intent) == ("payment_intent.succeeded",)


@pytest.mark.parametrize("make", [github_push, stripe_event, standard_event], ids=["github", "stripe", "standard"])
def test_a_tampered_body_is_refused_and_leaves_nothing(receiver, shop, make):
    signed = make() if make is github_push else make(shop)
    d = signed.with_body(tamper(signed.body, random.Random(0)))  # one byte changed after signing

    answer = send(receiver, d)

    assert (answer.status, answer.outcome) == (401, None), answer
    assert_database_answer(shop.conn, answer, "rejected", d.provider)
    assert shop.key(d) is None and shop.key(signed) is None
    assert shop.exactly_once(d) == ([], [])


def test_a_delivery_signed_with_another_key_is_refused(receiver, shop):
    d = deliveries.stripe(shop.conn, "whsec_not_the_stored_key", "charge.succeeded", "ch_1", int(time.time()))
    assert (send(receiver, d).status, shop.key(d)) == (401, None)


def test_a_delivery_without_its_event_id_is_a_bad_request(receiver, shop):
    d = github_push()
    headers = {k: v for k, v in d.headers.items() if k != "X-GitHub-Delivery"}
    answer = post(f"{receiver.url}/webhooks/github", d.body, headers)
    assert answer.status == 400, answer
    assert_database_answer(shop.conn, answer, "missing_event_id")


def test_a_message_with_an_empty_id_is_refused_with_svix_stop_signal(receiver, shop):
    """A Standard Webhooks message signed with an empty webhook-id: 400 with
    `webhook-delivery: abort-message`, Svix's signal to stop retrying it,
    which the database adds to the answer and the receiver passes on."""
    d = deliveries.standard(shop.conn, SECRETS["standard"], "invoice.paid", f"inv_{uuid.uuid4().hex[:12]}", msg_id="")
    answer = send(receiver, d)
    assert (answer.status, answer.headers.get("webhook-delivery")) == (400, "abort-message"), answer
    assert_database_answer(shop.conn, answer, "missing_event_id", "standard")


def test_the_same_event_id_with_other_content_is_a_conflict_answered_200(receiver, shop):
    """Every retry of these bytes would conflict again, so the answer stops
    them (the conflicting payload waits in webhook_dedup.conflicts)."""
    d = github_push()
    other = deliveries.github((FIXTURES / "ping" / "payload.json").read_bytes(), "ping", SECRETS["github"],
                              delivery_id=d.event_id)
    assert other.body != d.body

    first, reused = send(receiver, d), send(receiver, other)

    assert (first.status, first.outcome) == (200, "claimed"), first
    assert (reused.status, reused.outcome, json.loads(reused.body)) == (200, "conflict", {"status": "conflict"})
    assert_database_answer(shop.conn, reused, "conflict")
    assert shop.exactly_once(d) == ([1], [1])


def test_a_copy_in_flight_waits_for_its_holder_and_gets_the_first_answer(app, patient_receiver, shop):
    """A slow holder (X-Demo-Fault: slow) sleeps between its steps; a copy
    sent meanwhile waits (the provider's default wait: WEBHOOK_WAIT unset)
    until it completes, and is answered as the duplicate it then is: 200
    with the holder's body."""
    default_wait = shop.conn.execute("SELECT default_wait FROM webhook_dedup.providers"
                                     " WHERE scheme = 'github'").fetchone()[0]
    assert default_wait >= timedelta(seconds=SLOW_SECONDS + 3), default_wait
    assert re.search(rf"\bSLOW_SECONDS = {SLOW_SECONDS}\b", (app.folder / SLOW_JOB_FILES[app.name]).read_text())
    d = github_push()

    with ThreadPoolExecutor(max_workers=1) as pool:
        holder = pool.submit(send, patient_receiver, d, None, **{FAULT_HEADER: "slow"})
        wait_for_checkpoint(shop, d)  # the holder sleeps now, between its steps
        assert shop.key(d) == ("processing", 1)
        copy = send(patient_receiver, d)
        first = holder.result()

    assert (first.status, first.outcome) == (200, "claimed"), first
    assert (copy.status, copy.outcome, copy.body) == (200, "duplicate", first.body), copy
    assert_database_answer(shop.conn, copy, "duplicate", body=json.loads(first.body))
    assert shop.exactly_once(d) == ([1], [1])
    assert shop.key(d) == ("completed", 1)


def test_a_copy_whose_wait_ends_first_gets_503_with_retry_after(patient_receiver, impatient_receiver, shop):
    """A copy that waits less (0.5 s) than the slow holder takes: 503 with
    Retry-After, the seconds left on the holder's lease; its retry, once the
    holder completed, gets the first answer."""
    d = github_push()

    with ThreadPoolExecutor(max_workers=1) as pool:
        holder = pool.submit(send, patient_receiver, d, None, **{FAULT_HEADER: "slow"})
        wait_for_checkpoint(shop, d)
        copy = send(impatient_receiver, d)
        first = holder.result()
    retry = send(impatient_receiver, d)

    assert (copy.status, copy.outcome, json.loads(copy.body)) == (503, "in_progress", {"status": "in_progress"})
    assert_database_answer(shop.conn, copy, "in_progress", retry_after_max=SLOW_LEASE_SECONDS)
    assert (first.status, first.outcome) == (200, "claimed"), first
    assert (retry.status, retry.outcome, retry.body) == (200, "duplicate", first.body), retry
    assert shop.exactly_once(d) == ([1], [1])


@pytest.mark.parametrize("outcome", sorted(LEFT_BY_THE_HOLDER))
def test_a_delivery_of_a_failed_or_parked_key_is_answered_from_its_state(receiver, shop, outcome):
    left, status, retry_after_max = LEFT_BY_THE_HOLDER[outcome]
    d = github_push()
    key = shop.conn.execute("SELECT webhook_dedup.webhook_key('github', %s)", (d.event_id,)).fetchone()[0]
    token = shop.conn.execute(
        "SELECT claim_token FROM webhook_dedup.webhook_claim('github', %s, %s, '30 seconds', 'push')",
        (key, d.body)).fetchone()[0]
    shop.conn.execute(left, (key, token))

    answer = send(receiver, d)

    assert (answer.status, answer.outcome, json.loads(answer.body)) == (status, outcome, {"status": outcome})
    assert_database_answer(shop.conn, answer, outcome, retry_after_max=retry_after_max)
    assert shop.exactly_once(d) == ([], [])


def test_a_database_error_is_answered_as_http_answer_error(receiver, shop):
    """The answer the receiver read at start-up, http_answer('error'): 500."""
    d = github_push()
    shop.conn.execute("REVOKE webhook_dedup_receiver FROM shop_receiver")  # webhook_receive: permission denied
    try:
        answer = send(receiver, d)
    finally:
        shop.conn.execute("GRANT webhook_dedup_receiver TO shop_receiver")

    assert (answer.status, json.loads(answer.body)) == (500, {"error": "internal error"}), answer
    assert_database_answer(shop.conn, answer, "error")
    assert shop.key(d) is None


def test_an_unknown_provider_is_not_found(receiver):
    d = github_push()
    assert post(f"{receiver.url}/webhooks/nosuchprovider", d.body, d.headers).status == 404


@pytest.fixture(scope="session")
def role_without_the_receiver_role(db_conn) -> str:
    """A login role that was not granted webhook_dedup_receiver (so it may
    not execute webhook_dedup.webhook_receive)."""
    db_conn.execute(f"DROP ROLE IF EXISTS {NO_GRANT_ROLE}")
    db_conn.execute(f"CREATE ROLE {NO_GRANT_ROLE} LOGIN")
    yield NO_GRANT_ROLE
    db_conn.execute(f"DROP ROLE IF EXISTS {NO_GRANT_ROLE}")


@pytest.mark.parametrize("where, says", [
    ("a database without the extension", "run CREATE EXTENSION webhook_dedup"),
    ("a missing database", "does not exist"),
    # EXECUTE on webhook_dedup.webhook_receive is webhook_dedup_receiver's
    ("a role without webhook_dedup_receiver", "GRANT webhook_dedup_receiver TO examples_without_receiver_role"),
], ids=["no-extension", "no-database", "no-grant"])
def test_a_receiver_refuses_to_start_where_it_cannot_serve(app, app_env, database_without_the_extension,
                                                           role_without_the_receiver_role, tmp_path, where, says):
    """Rather than answering /healthz and then 500 to every delivery, the
    receiver exits at once, saying what is wrong in one line on its output
    (no traceback, no server start-up lines: examples/README.md)."""
    env = {**app_env, "PORT": str(free_port())}
    if where == "a database without the extension":
        env["PGDATABASE"] = database_without_the_extension
    elif where == "a missing database":
        env["PGDATABASE"] = "no_such_database"
    else:
        env["PGUSER"] = role_without_the_receiver_role
    receiver = Process(app.receiver, app.folder, env, tmp_path / "refused.log").start()
    try:
        assert receiver.exited(REFUSAL_DEADLINE_S), f"still running after {REFUSAL_DEADLINE_S} s:\n{receiver.output()}"
    finally:
        receiver.stop()
    assert receiver.proc.returncode != 0
    lines = receiver.output().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cannot start: ") and says in lines[0], receiver.output()


def test_two_workers_process_every_stored_delivery_exactly_once(enqueuing_receiver, workers, shop):
    events = [stripe_event(shop) for _ in range(6)] + [standard_event(shop) for _ in range(6)]
    first = [send(enqueuing_receiver, d) for d in events]
    again = [send(enqueuing_receiver, d) for d in events]  # the provider's redelivery, before any worker ran
    assert {(a.status, a.outcome) for a in first} == {(200, "accepted")}, first
    assert {(a.status, a.outcome) for a in again} == {(200, "duplicate")}, again
    assert_database_answer(shop.conn, first[0], "accepted", "stripe", mode="enqueue")
    assert_database_answer(shop.conn, again[0], "duplicate", "stripe", mode="enqueue")
    # Not processed yet: no stored result to answer a duplicate with
    # (enqueue mode does not read it), so every stack answers the same bodies.
    assert [json.loads(a.body) for a in first] == [{"status": "accepted"}] * len(events), first
    assert [json.loads(a.body) for a in again] == [{"status": "duplicate"}] * len(events), again

    pool = [workers(), workers()]
    for d in events:
        wait_for_state(shop, d, "completed", pool)
    for d in events:
        assert shop.exactly_once(d) == ([1], [1]), d.event_id


def test_the_worker_applies_events_under_the_monotonic_guard(enqueuing_receiver, workers, shop):
    intent, t = f"pi_{uuid.uuid4().hex[:16]}", int(time.time()) - 60
    newer = stripe_event(shop, "payment_intent.payment_failed", intent, created=t + 3)
    older = stripe_event(shop, "payment_intent.processing", intent, created=t + 1)
    assert [send(enqueuing_receiver, d).status for d in (newer, older)] == [200, 200]

    pool = [workers()]
    for d in (newer, older):
        wait_for_state(shop, d, "completed", pool)
    assert shop.subject("stripe", intent) == ("payment_intent.payment_failed",)
    assert shop.exactly_once(newer) == ([1], [1]) and shop.exactly_once(older) == ([1], [1])


def test_the_worker_reads_the_standard_webhooks_event_time(enqueuing_receiver, workers, shop):
    """Standard Webhooks events carry their time in the body's `timestamp`
    (RFC 3339), which the worker reads as webhook_receive does: to the
    microsecond, with its offset. The newer event (250 µs later, in the same
    millisecond, written at UTC+05:30) is enqueued and processed first; the
    older one then does not move the subject back."""
    invoice = f"inv_{uuid.uuid4().hex[:12]}"
    t = datetime.now(timezone.utc).replace(microsecond=123456) - timedelta(minutes=1)
    newer_at = (t + timedelta(microseconds=250)).astimezone(timezone(timedelta(hours=5, minutes=30)))
    newer = deliveries.standard(shop.conn, SECRETS["standard"], "invoice.payment_failed", invoice, at=newer_at)
    older = deliveries.standard(shop.conn, SECRETS["standard"], "invoice.created", invoice, at=t)
    assert [send(enqueuing_receiver, d).status for d in (newer, older)] == [200, 200]

    pool = [workers()]
    for d in (newer, older):
        wait_for_state(shop, d, "completed", pool)
    assert shop.subject("standard", invoice) == ("invoice.payment_failed",)
    assert shop.subject_updated_at("standard", invoice) == newer_at
    assert shop.exactly_once(newer) == ([1], [1]) and shop.exactly_once(older) == ([1], [1])


@pytest.mark.parametrize("fault, expected", [("crash-after-claim", ([2], [2])),
                                             ("crash-after-checkpoint", ([1], [2]))])
def test_a_worker_killed_mid_job_is_taken_over_after_its_lease(enqueuing_receiver, workers, shop, fault, expected):
    d = stripe_event(shop)
    assert send(enqueuing_receiver, d).status == 200

    doomed = workers(WORKER_FAULT=fault)
    assert doomed.exited(WORKER_DEADLINE_S), f"the worker did not die on {fault}:\n{doomed.output()}"
    assert shop.key(d) == ("processing", 1)
    assert shop.exactly_once(d) == (([], []) if fault == "crash-after-claim" else ([1], []))

    survivor = workers()
    wait_for_state(shop, d, "completed", [doomed, survivor])
    assert shop.exactly_once(d) == expected
    assert shop.key(d) == ("completed", 2)


def test_a_due_key_without_a_payload_is_failed_and_the_worker_goes_on(enqueuing_receiver, workers, shop):
    """webhook_next hands out every due key of every source, and a key claimed
    without its body (webhook_claim, or webhook_receive in claim mode) whose
    holder died is due once its lease lapses, with a NULL payload. The worker
    records it as a retryable failure and goes on with the next delivery (the
    FastAPI and Django worker used to die on it: the fresh clone's run of
    797e6f4 failed so, when another test's lapsed claim came due)."""
    orphan = f"orphan_{uuid.uuid4().hex[:12]}"
    try:
        outcome, = shop.conn.execute("SELECT outcome FROM webhook_dedup.webhook_claim('stripe', %s, lease => '1 second')",
                                     (orphan,)).fetchone()
        assert outcome == "claimed"
        time.sleep(1.5)  # its holder never finishes: the lease lapses
        d = stripe_event(shop)
        assert send(enqueuing_receiver, d).status == 200

        worker = workers()
        wait_for_state(shop, d, "completed", [worker])
        deadline = time.monotonic() + WORKER_DEADLINE_S
        while shop.conn.execute("SELECT attempt FROM webhook_dedup.keys WHERE source = 'stripe' AND idem_key = %s",
                                (orphan,)).fetchone()[0] < 2 and time.monotonic() < deadline:
            time.sleep(0.1)  # oldest first: taken before d, unless the sweeper took it first
        assert not worker.exited(), f"the worker died:\n{worker.output()}"
        worker.stop()  # a clean stop: the jobs it holds are finished first
        state, attempt, error = shop.conn.execute(
            "SELECT state, attempt, last_error FROM webhook_dedup.keys WHERE source = 'stripe' AND idem_key = %s",
            (orphan,)).fetchone()
        assert state in ("failed", "dead_lettered") and attempt >= 2, (state, attempt, worker.output())
        assert "no stored payload" in error, (error, worker.output())
        assert shop.exactly_once(d) == ([1], [1])
    finally:
        shop.conn.execute("SELECT webhook_dedup.webhook_forget('stripe', %s)", (orphan,))


# The outbox (docs/outbox.md): step 1 of the job commits the notification's
# intent; each stack's sender delivers it to a notification service on
# loopback (tests/e2e/downstream.py) that performs a call once per
# Idempotency-Key and records every request.
SENDER_LEASE_SECONDS = 1


@pytest.fixture()
def downstream():
    d = Downstream()
    yield d
    d.close()


@pytest.fixture()
def senders(app, app_env, downstream, tmp_path):
    """Starts senders of the app on demand, pointed at the test's
    notification service; stops them all afterwards."""
    started = []

    def start(**env) -> Process:
        log = tmp_path / f"sender{len(started)}.log"
        env = {**app_env, "NOTIFY_URL": downstream.url, "SENDER_LEASE": f"{SENDER_LEASE_SECONDS} second", **env}
        started.append(Process(app.sender, app.folder, env, log).start())
        return started[-1]

    yield start
    for s in started:
        s.stop()


def wait_for_intent(shop: Shop, d: deliveries.Delivery, state: str, procs=()) -> tuple:
    deadline = time.monotonic() + WORKER_DEADLINE_S
    while time.monotonic() < deadline:
        intent = shop.intent(d)
        if intent and intent[0] == state:
            return intent
        time.sleep(0.05)
    logs = "\n".join(p.output() for p in procs)
    pytest.fail(f"the intent of {d.event_id} is {shop.intent(d)}, not {state}; sender output:\n{logs}", pytrace=False)


def drain_notifications(shop: Shop, senders) -> None:
    """Deliver the intents earlier tests left, so that a sender started next
    takes this test's intent and no other."""
    sender = senders()
    deadline = time.monotonic() + WORKER_DEADLINE_S
    while shop.conn.execute("SELECT count(*) FROM webhook_dedup.outbox WHERE target = 'notifications'"
                            " AND state IN ('pending', 'processing', 'failed')").fetchone()[0]:
        assert time.monotonic() < deadline, f"the backlog was not delivered:\n{sender.output()}"
        time.sleep(0.1)
    sender.stop()


def notify_key(shop: Shop, d: deliveries.Delivery) -> str:
    """The downstream key the intent of the delivery's notification must carry."""
    return shop.conn.execute("SELECT webhook_dedup.webhook_operation_key(%s, webhook_dedup.webhook_key(%s, %s), 'notify')",
                             (d.provider, d.provider, d.event_id)).fetchone()[0]


def test_the_sender_delivers_each_notification_once(receiver, senders, downstream, shop):
    d = stripe_event(shop)
    assert [send(receiver, d).outcome for _ in range(2)] == ["claimed", "duplicate"]
    assert shop.exactly_once(d) == ([1], [1])  # one intent, by the claim's first attempt
    sender = senders()
    state, attempt, key, response = wait_for_intent(shop, d, "completed", [sender])
    assert key == notify_key(shop, d) and attempt == 1
    mine = [(k, body) for k, body in downstream.requests if k == key]
    assert mine == [(key, {"source": "stripe", "idem_key": f"stripe:{d.event_id}",
                           "event_type": "payment_intent.succeeded"})]
    assert response == downstream.performed[key]


@pytest.mark.parametrize("fault", ["crash-after-call", "crash-before-call"])
def test_a_sender_killed_around_the_call_delivers_once_with_one_key(receiver, senders, downstream, shop, fault):
    """Killed after the call and before the ack, the next sender repeats the
    call with the same key (the service performs once); killed before the
    call, nothing is lost."""
    drain_notifications(shop, senders)
    d = standard_event(shop)
    assert send(receiver, d).outcome == "claimed"
    key = notify_key(shop, d)

    doomed = senders(SENDER_FAULT=fault)
    assert doomed.exited(WORKER_DEADLINE_S), f"the sender did not die on {fault}:\n{doomed.output()}"
    assert shop.intent(d)[:2] == ("processing", 1), "the dead sender's lease holds the intent"
    seen = 1 if fault == "crash-after-call" else 0
    assert downstream.keys().count(key) == seen

    survivor = senders()  # takes it once the dead sender's lease (1 s) lapsed
    state, attempt, _, response = wait_for_intent(shop, d, "completed", [doomed, survivor])
    assert attempt == 2
    assert downstream.keys().count(key) == seen + 1, "the same key on every attempt"
    assert response == downstream.performed[key], "performed once: the repeat got the first answer"
    assert list(downstream.performed).count(key) == 1
    assert shop.exactly_once(d) == ([1], [1]), "one intent, delivered once"
