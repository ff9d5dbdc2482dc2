"""The outbox's sender (sync.OutboxSender, aio.OutboxSender) and the README's
outbox program (examples/outbox.py) against the cluster and a deduplicating
fake downstream on loopback: docs/outbox.md's failure table, a sender
killed (SIGKILL) between the downstream call and the ack, and stop()."""

import asyncio
import importlib.util
import signal
import subprocess
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

import webhook_dedup
from webhook_dedup import Claim, SendError, aio, sync
from webhook_dedup.core import Intent, report_of

from conftest import EXAMPLES, SESSION, app_env, conninfo, python
from downstream import Downstream

SOURCE = f"sender-{SESSION}"


@pytest.fixture(scope="module")
def downstream():
    server = Downstream()
    yield server
    server.close()


@pytest.fixture(scope="module")
def outbox(downstream):
    """examples/outbox.py as a module (its job and its send), calling the downstream."""
    import os
    os.environ["NOTIFY_URL"] = downstream.url
    spec = importlib.util.spec_from_file_location("readme_outbox", EXAMPLES / "outbox.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    del os.environ["NOTIFY_URL"]


@pytest.fixture(scope="module")
def pool(app_db):
    with ConnectionPool(conninfo(user=app_db["PGUSER"], dbname=app_db["PGDATABASE"]), min_size=1, max_size=4,
                        kwargs={"autocommit": True}, open=True) as p:
        yield p


def claim(pool) -> Claim:
    key = uuid.uuid4().hex
    with pool.connection() as conn:
        token = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim(%s, %s)", (SOURCE, key)).fetchone()[0]
    return Claim(SOURCE, key, token)


def put(pool, admin, target, idempotent=True, job=None) -> tuple:
    """A claimed key's job that writes one intent (the README's job, or one
    of `target`): (the intent's id, its downstream key, the event's key)."""
    def default_job(conn, c):
        sync.outbox_put(conn, c, "notify", target, {"to": c.idem_key}, downstream_idempotent=idempotent)
        return {"ok": True}

    held = claim(pool)
    assert sync.with_claim(pool, held, job or default_job).status == "completed"
    return admin.execute("SELECT id, downstream_key, idem_key FROM webhook_dedup.outbox"
                         " WHERE source = %s AND idem_key = %s", (held.source, held.idem_key)).fetchone()


def state(app_admin, intent_id) -> dict:
    return app_admin.execute(
        "SELECT state, attempt, response, last_error, next_attempt_at, now() AS now FROM webhook_dedup.outbox"
        " WHERE id = %s", (intent_id,)).fetchone()


def wait_for(app_admin, intent_id, states, proc=None, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        row = state(app_admin, intent_id)
        if row[0] in states:
            return row
        assert proc is None or proc.poll() is None, "the sender exited"
        assert time.monotonic() < deadline, f"intent {intent_id} stayed {row}"
        time.sleep(0.05)


class Running:
    """A sync.OutboxSender in a thread."""

    def __init__(self, sender):
        self.sender = sender
        self.thread = threading.Thread(target=sender.run)
        self.thread.start()

    def stop(self):
        self.sender.stop()
        self.thread.join(20)
        assert not self.thread.is_alive()


def sender_process(app_db, downstream, tmp_path, name):
    log = open(tmp_path / f"{name}.log", "wb")
    return subprocess.Popen([python(), str(EXAMPLES / "outbox.py")],
                            env=app_env(app_db, NOTIFY_URL=downstream.url, SENDER_LEASE="2 seconds"),
                            stdout=log, stderr=subprocess.STDOUT)


def test_a_sender_killed_between_the_call_and_the_ack_is_repeated_with_the_same_key_and_performed_once(
        app_db, app_admin, pool, downstream, outbox, tmp_path):
    intent_id, key, event_key = put(pool, app_admin, outbox.TARGET, job=outbox.job)
    performed, release = downstream.hold_next()      # the call is performed, its answer held
    first = sender_process(app_db, downstream, tmp_path, "first")
    try:
        assert performed.wait(30), "the sender made no call"
        first.send_signal(signal.SIGKILL)             # between the downstream call and the ack
        first.wait(10)
    finally:
        release.set()
        if first.poll() is None:
            first.kill()
    assert state(app_admin, intent_id)[:2] == ("processing", 1)  # leased to the dead sender, never acked
    second = sender_process(app_db, downstream, tmp_path, "second")
    try:
        done = wait_for(app_admin, intent_id, {"completed"}, second)  # once the 2-second lease lapsed
        second.send_signal(signal.SIGTERM)
        assert second.wait(20) == 0
    finally:
        if second.poll() is None:
            second.kill()
    assert downstream.keys(key) == [key, key]          # the call twice, with the same key
    assert (done[0], done[1], done[2]) == ("completed", 2, downstream.performed[key])  # performed once
    assert app_admin.execute("SELECT count(*) FROM events WHERE idem_key = %s", (event_key,)).fetchone()[0] == 1


def test_sigterm_stops_the_readme_sender_after_the_intent_in_hand(app_db, app_admin, pool, downstream, outbox,
                                                                   tmp_path):
    in_hand, _, _ = put(pool, app_admin, outbox.TARGET, job=outbox.job)
    waiting, _, _ = put(pool, app_admin, outbox.TARGET, job=outbox.job)
    performed, release = downstream.hold_next()
    proc = sender_process(app_db, downstream, tmp_path, "stopped")
    try:
        assert performed.wait(30)
        proc.send_signal(signal.SIGTERM)               # while the call is in flight
        release.set()
        assert proc.wait(20) == 0
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
    assert state(app_admin, in_hand)[:2] == ("completed", 1)  # the call in hand was acked
    assert state(app_admin, waiting)[:2] == ("pending", 0)    # no other taken
    running = Running(sync.OutboxSender(pool, outbox.TARGET, outbox.send, lease="10 seconds", idle_s=0.05))
    try:
        wait_for(app_admin, waiting, {"completed"})
    finally:
        running.stop()


def test_a_4xx_is_a_dead_letter_and_a_503_is_retried_after_its_retry_after(app_admin, pool, downstream, outbox):
    target = f"codes-{SESSION}"
    refused, refused_key, _ = put(pool, app_admin, target)
    busy, busy_key, _ = put(pool, app_admin, target)
    later, later_key, _ = put(pool, app_admin, target)
    downstream.fail_next(refused_key, 400)
    downstream.fail_next(busy_key, 503, retry_after=0)
    downstream.fail_next(later_key, 429, retry_after=3600)
    running = Running(sync.OutboxSender(pool, target, outbox.send, lease="10 seconds", batch=2, idle_s=0.05))
    try:
        dead = wait_for(app_admin, refused, {"dead_lettered"})
        retried = wait_for(app_admin, busy, {"completed"})
        waiting = wait_for(app_admin, later, {"failed"})
    finally:
        running.stop()
    assert (dead[1], dead[3], downstream.keys(refused_key)) == (1, "HTTP 400", [refused_key])
    assert refused_key not in downstream.performed
    assert (retried[1], retried[2], downstream.keys(busy_key)) == (2, downstream.performed[busy_key],
                                                                   [busy_key, busy_key])
    assert waiting[3] == "HTTP 429" and waiting[4] > waiting[5] + timedelta(minutes=59)  # its Retry-After
    assert downstream.keys(later_key) == [later_key]


def test_an_unknown_outcome_is_parked_only_where_the_downstream_is_not_idempotent(app_admin, pool):
    target = f"unknown-{SESSION}"
    parked, _, _ = put(pool, app_admin, target, idempotent=False)
    retried, _, _ = put(pool, app_admin, target, idempotent=True)
    refused, _, _ = put(pool, app_admin, target, idempotent=False)

    def send(intent):
        if intent.id == refused:
            raise SendError("connection refused", sent=False)
        raise TimeoutError("no answer after sending")     # says nothing: it may have been sent

    running = Running(sync.OutboxSender(pool, target, send, lease="1 hour", batch=3, idle_s=0.05))
    try:
        assert wait_for(app_admin, parked, {"unknown_outcome"})[3] == "no answer after sending"
        assert wait_for(app_admin, retried, {"failed"})[1] == 1
        assert wait_for(app_admin, refused, {"failed"})[3] == "connection refused"
    finally:
        running.stop()


def intent(idempotent=True) -> Intent:
    return Intent(1, "t", "k", "x", "op", {}, 1, None, "s", "i", idempotent)


@pytest.mark.parametrize("error, idempotent, what, retryable, retry_after", [
    (SendError("", status=400), True, "dead_lettered", False, None),
    (SendError("", status=404), False, "dead_lettered", False, None),
    (SendError("", status=409), True, "dead_lettered", False, None),
    (SendError("", status=422), True, "dead_lettered", False, None),
    (SendError("", status=429, retry_after=7), True, "failed", True, timedelta(seconds=7)),
    (SendError("", status=408), False, "failed", True, None),
    (SendError("", status=503), False, "failed", True, None),
    (SendError("", status=500, retry_after=2.5), True, "failed", True, timedelta(seconds=2.5)),
    (SendError("", sent=False), False, "failed", True, None),
    (SendError("", sent=True), True, "failed", True, None),
    (SendError("", sent=True), False, "unknown", None, None),
    (RuntimeError("boom"), False, "unknown", None, None),
    (RuntimeError("boom"), True, "failed", True, None),
    (type("NodeStyle", (Exception,), {"status": 503, "retryAfter": 4})(), True, "failed", True, timedelta(seconds=4)),
])
def test_the_failure_table(error, idempotent, what, retryable, retry_after):
    got, sql, params = report_of(intent(idempotent), error)
    assert got == what
    if what == "unknown":
        assert "webhook_outbox_unknown" in sql
    else:
        assert "webhook_outbox_fail" in sql and params[3:] == (retryable, retry_after)


def test_on_error_is_called_when_the_database_is_gone(app_db):
    errors = []
    with ConnectionPool(conninfo(user=app_db["PGUSER"], dbname="no_such_database"), min_size=0, max_size=1,
                        timeout=0.2,
                        open=True) as bad:
        running = Running(sync.OutboxSender(bad, "x", lambda i: None, idle_s=0.01, on_error=errors.append))
        deadline = time.monotonic() + 30
        while not errors:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        running.stop()
    assert "timeout" in type(errors[0]).__name__.lower() or "database" in str(errors[0])


def test_the_asyncio_sender(app_db, app_admin, pool, downstream, outbox):
    target = f"aio-{SESSION}"
    good, good_key, _ = put(pool, app_admin, target)
    refused, refused_key, _ = put(pool, app_admin, target)
    downstream.fail_next(refused_key, 422)
    seen = []

    async def scenario():
        async with AsyncConnectionPool(conninfo(user=app_db["PGUSER"], dbname=app_db["PGDATABASE"]), min_size=1,
                                       kwargs={"autocommit": True}, open=False) as apool:
            async def send(intent):
                seen.append(intent.downstream_key)
                if len(seen) == 2:
                    sender.stop()                      # in the middle of the last send: it still reports it
                return await asyncio.to_thread(outbox.send, intent)

            sender = aio.OutboxSender(apool, target, send, lease="10 seconds", idle_s=0.05)
            await asyncio.wait_for(sender.run(), 30)

    asyncio.run(scenario())
    assert sorted(seen) == sorted([good_key, refused_key])
    assert state(app_admin, good)[:3] == ("completed", 1, downstream.performed[good_key])
    assert state(app_admin, refused)[:2] == ("dead_lettered", 1)
