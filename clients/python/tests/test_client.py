"""The Python package against a real cluster with webhook_dedup (the libpq
environment variables PGHOST, PGPORT, PGUSER, PGDATABASE, as
scripts/test.sh sets them; the role must be a superuser, which the tests
use to make a receiver login of their own): the sync and the asyncio API,
and the FastAPI (Starlette) and Django answers.
"""

import asyncio
import hashlib
import hmac
import json
import os
import threading
import time
import uuid

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

import webhook_dedup
from webhook_dedup import aio, sync
from webhook_dedup.frameworks import from_django, from_starlette, to_django, to_starlette

RUN = uuid.uuid4().hex[:8]
SECRET = f"python-secret-{RUN}"
RECEIVER = f"py_receiver_{RUN}"


def conninfo(**kw) -> str:
    return psycopg.conninfo.make_conninfo("", **kw)


@pytest.fixture(scope="module")
def admin():
    missing = [v for v in ("PGHOST", "PGPORT", "PGUSER", "PGDATABASE") if not os.environ.get(v)]
    if missing:
        pytest.fail(f"these tests need {', '.join(missing)} (scripts/test.sh sets them)", pytrace=False)
    with psycopg.connect(conninfo(), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {RECEIVER} LOGIN")
        conn.execute(f"GRANT webhook_dedup_receiver TO {RECEIVER}")
        conn.execute("CREATE TABLE IF NOT EXISTS public.py_client_effects (idem_key text PRIMARY KEY, n int)")
        conn.execute(f"GRANT INSERT, SELECT ON public.py_client_effects TO {RECEIVER}")
        yield conn
        conn.execute(f"DROP OWNED BY {RECEIVER}")
        conn.execute(f"DROP ROLE {RECEIVER}")


@pytest.fixture(scope="module")
def conn(admin):
    """The receiver login, autocommit, as an application holds it."""
    with psycopg.connect(conninfo(user=RECEIVER), autocommit=True) as c:
        yield c


@pytest.fixture(scope="module")
def pool(admin):
    with ConnectionPool(conninfo(user=RECEIVER), min_size=1, max_size=4, open=True) as p:
        yield p


def github(delivery_id: str, body: bytes, signature=None) -> dict:
    signature = signature or "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {"X-GitHub-Event": "issues", "X-GitHub-Delivery": delivery_id, "X-Hub-Signature-256": signature}


def test_check_installed_says_what_to_grant(admin, conn):
    sync.check_installed(conn)
    stranger = f"py_stranger_{RUN}"
    admin.execute(f"CREATE ROLE {stranger} LOGIN")
    try:
        with psycopg.connect(conninfo(user=stranger), autocommit=True) as other:
            with pytest.raises(webhook_dedup.NotReady, match=f"GRANT webhook_dedup_receiver TO {stranger}"):
                sync.check_installed(other)
    finally:
        admin.execute(f"DROP ROLE {stranger}")


def test_claim_complete_and_the_copy_answered_with_the_result(conn, pool, admin):
    body = json.dumps({"action": "opened", "n": 1, "run": RUN}).encode()  # GitHub keys a redelivery by its body
    first = sync.receive(conn, "github", body, github(f"d1-{RUN}", body), secrets=[SECRET])
    assert (first.verified, first.outcome, first.must_process, first.answer.body) == (True, "claimed", True, None)

    def job(c, claim):
        c.execute("INSERT INTO public.py_client_effects VALUES (%s, 1)", (claim.idem_key,))
        return {"status": 200, "ok": True}

    done = sync.with_claim(pool, webhook_dedup.Claim(first.source, first.idem_key, first.claim_token), job)
    assert (done.status, done.result) == ("completed", {"ok": True, "status": 200})
    copy = sync.receive(conn, "github", body, github(f"d1-{RUN}", body), secrets=[SECRET])
    assert (copy.outcome, copy.must_process, copy.answer.status, copy.answer.body) == \
        ("duplicate", False, 200, done.result)
    assert copy.answer.headers["Content-Type"] == "application/json"
    # the first delivery's answer once its work committed is the duplicate's
    after = webhook_dedup.answer_after(first, done.result)
    assert (after.status, after.headers, after.body_bytes()) == \
        (copy.answer.status, copy.answer.headers, copy.answer.body_bytes())
    assert (after.outcome, copy.answer.outcome) == ("claimed", "duplicate")  # each says what it answers


def test_a_forged_signature_writes_nothing(conn, admin):
    body = b'{"n": 2}'
    forged = sync.receive(conn, "github", body, github(f"forged-{RUN}", body, "sha256=00"), secrets=[SECRET])
    assert (forged.verified, forged.outcome, forged.answer.status) == (False, None, 401)
    assert admin.execute("SELECT count(*) FROM webhook_dedup.keys WHERE idem_key LIKE %s",
                         (f"%forged-{RUN}%",)).fetchone()[0] == 0


def test_a_body_with_zero_bytes_and_bytes_that_are_not_utf8_round_trips(conn):
    body = bytes([0x7B, 0x00, 0x01, 0xFF, 0xFE, 0x80, 0x00, 0x7D, 0xC3, 0x28])
    source = f"bytes-{RUN}"
    queued = sync.receive(conn, "github", body, github(f"bytes-{RUN}", body), secrets=[SECRET], mode="enqueue",
                          source=source)
    assert (queued.verified, queued.outcome) == (True, "accepted")  # the HMAC over every byte verified
    payload = conn.execute("SELECT payload FROM webhook_dedup.webhook_next(source => %s)", (source,)).fetchone()[0]
    assert payload == body


def test_with_claim_records_a_failure_on_a_pool_of_dict_rows(conn, admin):
    from psycopg.rows import dict_row
    source = f"dictrows-{RUN}"
    token = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim(%s, 'k')", (source,)).fetchone()[0]
    with ConnectionPool(conninfo(user=RECEIVER), min_size=1, max_size=2, open=True,
                        kwargs={"row_factory": dict_row, "autocommit": True}) as dict_pool:
        def failing(c, claim):
            raise ValueError("bad payload")
        done = sync.with_claim(dict_pool, webhook_dedup.Claim(source, "k", token), failing, retryable=False)
    assert (done.status, done.state, str(done.error)) == ("failed", "dead_lettered", "bad payload")


def test_a_body_must_be_bytes_and_options_must_exist(conn):
    with pytest.raises(TypeError, match="list of keys"):
        sync.receive(conn, "github", b"{}", {}, secrets=SECRET)
    with pytest.raises(TypeError, match="raw bytes"):
        sync.receive(conn, "github", "text", {})
    with pytest.raises(TypeError, match="no option colour"):
        sync.receive(conn, "github", b"{}", {}, colour="red")


def test_with_claim_rolls_back_on_a_stale_token_and_records_an_exception(conn, pool, admin):
    source = f"stale-{RUN}"
    conn.execute("SELECT webhook_dedup.webhook_claim(%s, 'k')", (source,))

    def job(c, claim):
        c.execute("INSERT INTO public.py_client_effects VALUES (%s, 2)", (source,))
        return {"ok": True}

    stale = sync.with_claim(pool, webhook_dedup.Claim(source, "k", uuid.uuid4()), job)
    assert stale.status == "lease_lost"
    assert admin.execute("SELECT count(*) FROM public.py_client_effects WHERE idem_key = %s",
                         (source,)).fetchone()[0] == 0

    token = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim(%s, 'k2')", (source,)).fetchone()[0]

    def failing(c, claim):
        c.execute("INSERT INTO public.py_client_effects VALUES (%s, 3)", (source + "/k2",))
        raise RuntimeError("downstream timed out")

    failed = sync.with_claim(pool, webhook_dedup.Claim(source, "k2", token), failing)
    assert (failed.status, failed.state, str(failed.error)) == ("failed", "failed", "downstream timed out")
    assert admin.execute("SELECT state, last_error FROM webhook_dedup.keys WHERE source = %s AND idem_key = 'k2'",
                         (source,)).fetchone() == ("failed", "downstream timed out")
    assert admin.execute("SELECT count(*) FROM public.py_client_effects WHERE idem_key = %s",
                         (source + "/k2",)).fetchone()[0] == 0


def test_the_sync_worker_processes_every_delivery_once_and_stops(conn, pool, admin):
    source = f"queue-{RUN}"
    for i in range(6):
        conn.execute("SELECT webhook_dedup.webhook_enqueue(%s, %s, %s)", (source, f"k{i}", json.dumps({"n": i}).encode()))

    def handler(delivery):
        n = json.loads(delivery.payload)["n"]
        if n == 5:
            raise RuntimeError("no with_claim")  # the worker records it

        def job(c, claim):
            c.execute("INSERT INTO public.py_client_effects VALUES (%s, %s)", (f"{source}/{claim.idem_key}", n))
            return {"n": n}

        sync.with_claim(pool, delivery, job)

    worker = sync.Worker(pool, handler, source=source, batch=4, idle_s=0.05)
    thread = threading.Thread(target=worker.run)
    thread.start()
    deadline = time.monotonic() + 10
    while admin.execute("SELECT count(*) FROM webhook_dedup.keys WHERE source = %s AND state <> 'processing'"
                        " AND state <> 'pending'", (source,)).fetchone()[0] < 6:
        assert time.monotonic() < deadline, "the worker did not process the queue"
        time.sleep(0.05)
    worker.stop()
    thread.join(5)
    assert not thread.is_alive()
    states = admin.execute("SELECT idem_key, state FROM webhook_dedup.keys WHERE source = %s ORDER BY idem_key",
                           (source,)).fetchall()
    assert states == [("k0", "completed"), ("k1", "completed"), ("k2", "completed"), ("k3", "completed"),
                      ("k4", "completed"), ("k5", "failed")]


def test_the_asyncio_api(admin):
    async def scenario():
        source = f"aio-{RUN}"
        async with AsyncConnectionPool(conninfo(user=RECEIVER), min_size=1, max_size=3, open=False) as apool:
            async with await psycopg.AsyncConnection.connect(conninfo(user=RECEIVER), autocommit=True) as aconn:
                await aio.check_installed(aconn)
                body = b'{"aio": true}'
                first = await aio.receive(aconn, "github", body, github(f"aio-{RUN}", body), secrets=[SECRET],
                                          source=source)
                assert first.outcome == "claimed"

                async def job(c, claim):
                    await c.execute("INSERT INTO public.py_client_effects VALUES (%s, 9)", (source,))
                    return {"aio": 1}

                done = await aio.with_claim(apool, first, job)
                assert (done.status, done.result) == ("completed", {"aio": 1})
                copy = await aio.receive(aconn, "github", body, github(f"aio-{RUN}", body), secrets=[SECRET],
                                         source=source)
                assert (copy.outcome, copy.answer.body) == ("duplicate", {"aio": 1})
                lost = await aio.http_answer(aconn, "lease_lost", scheme="github")
                assert (lost.status, lost.body) == (503, {"status": "lease_lost"})

                for i in range(3):
                    await aconn.execute("SELECT webhook_dedup.webhook_enqueue(%s, %s, '\\x00ff'::bytea)",
                                        (source + "-q", f"q{i}"))
                seen = []

                async def handler(delivery):
                    seen.append((delivery.idem_key, delivery.payload))
                    await aio.with_claim(apool, delivery, lambda c, claim: asyncio.sleep(0, {"q": claim.idem_key}))
                    if len(seen) == 3:
                        worker.stop()

                worker = aio.Worker(apool, handler, source=source + "-q", idle_s=0.05)
                await asyncio.wait_for(worker.run(), 10)
                assert sorted(seen) == [("q0", b"\x00\xff"), ("q1", b"\x00\xff"), ("q2", b"\x00\xff")]

    asyncio.run(scenario())

    # a Worker made outside any event loop runs in one, and in a second one
    async def drain(worker):
        await asyncio.wait_for(worker.run(), 10)

    async def enqueue_and_drain(worker, key):
        async with await psycopg.AsyncConnection.connect(conninfo(user=RECEIVER), autocommit=True) as aconn:
            await aconn.execute("SELECT webhook_dedup.webhook_enqueue(%s, %s, '\\x01'::bytea)", (f"aio-{RUN}-q", key))
        await drain(worker)

    def made_outside():
        async def handler(delivery):
            await aio.with_claim(worker.pool, delivery, lambda c, claim: asyncio.sleep(0, {"late": True}))
            worker.stop()

        worker = aio.Worker(None, handler, source=f"aio-{RUN}-q", idle_s=0.05)
        return worker

    async def with_pool(worker, key):
        async with AsyncConnectionPool(conninfo(user=RECEIVER), min_size=1, max_size=2) as p:
            worker.pool = p
            await enqueue_and_drain(worker, key)

    first_worker, second_worker = made_outside(), made_outside()  # no event loop runs here
    asyncio.run(with_pool(first_worker, "late1"))
    asyncio.run(with_pool(second_worker, "late2"))  # another loop
    assert admin.execute("SELECT count(*) FROM webhook_dedup.keys WHERE source = %s AND state = 'completed'",
                         (f"aio-{RUN}-q",)).fetchone()[0] == 5


def test_http_answer_for_the_outcomes_after_the_work(conn):
    assert sync.http_answer(conn, "error").status == 500
    busy = sync.http_answer(conn, "in_progress", scheme="stripe", retry_after="2 seconds")
    assert (busy.status, busy.headers, busy.body) == (503, {"Content-Type": "application/json", "Retry-After": "2"},
                                                      {"status": "in_progress"})
    assert sync.http_answer(conn, "completed", result={"id": 7}).body == {"id": 7}
    with pytest.raises(psycopg.Error) as raised:
        sync.http_answer(conn, "no_such_outcome")
    assert raised.value.sqlstate == "22023"


def test_framework_answers_are_exact():
    answer = webhook_dedup.Answer(429, {"Content-Type": "application/json", "Retry-After": "3"}, {"a": 1})
    response = to_starlette(answer, **{"X-Webhook-Outcome": "in_progress"})
    assert response.status_code == 429
    assert response.headers["content-type"] == "application/json"  # no charset added
    assert response.headers["retry-after"] == "3" and response.headers["x-webhook-outcome"] == "in_progress"
    assert json.loads(response.body) == {"a": 1}

    from django.conf import settings
    if not settings.configured:
        settings.configure(DEFAULT_CHARSET="utf-8")
    problem = to_django(webhook_dedup.Answer(422, {"content-type": "application/problem+json"}, {"e": 1}))
    assert problem["Content-Type"] == "application/problem+json"
    django_response = to_django(answer)
    assert django_response.status_code == 429
    assert django_response["Content-Type"] == "application/json"
    assert django_response["Retry-After"] == "3"
    assert json.loads(django_response.content) == {"a": 1}

    from django.test import RequestFactory
    request = RequestFactory().post("/webhooks/github", data=b"\x00\xff", content_type="application/octet-stream",
                                    HTTP_X_HUB_SIGNATURE_256="sha256=ab")
    body, headers = from_django(request)
    assert body == b"\x00\xff" and headers["x-hub-signature-256"] == "sha256=ab"

    class FakeStarletteRequest:
        headers = type("H", (), {"items": lambda self: [("X-Rep", "a"), ("x-rep", "b"), ("X-Once", "c")],
                                 "get": lambda self, name: None})()

        async def stream(self):
            yield b"\x00"
            yield b"\x01"

    body, headers = asyncio.run(from_starlette(FakeStarletteRequest()))
    assert body == b"\x00\x01" and headers == {"x-rep": ["a", "b"], "x-once": "c"}


def test_a_deliverys_answer_carries_its_outcome_as_x_webhook_outcome(conn):
    body = json.dumps({"outcome": RUN}).encode()
    first = sync.receive(conn, "github", body, github(f"outcome-{RUN}", body), secrets=[SECRET])
    assert first.answer.outcome == "claimed"
    assert webhook_dedup.answer_after(first, {"ok": 1}).outcome == "claimed"
    busy = sync.receive(conn, "github", body, github(f"outcome-{RUN}", body), secrets=[SECRET], wait="0")
    assert (busy.outcome, busy.answer.outcome, busy.answer.status) == ("in_progress", "in_progress", 503)
    response = to_starlette(busy.answer)
    assert (response.headers["x-webhook-outcome"], response.headers["retry-after"]) == \
        ("in_progress", busy.answer.headers["Retry-After"])
    from django.conf import settings
    if not settings.configured:
        settings.configure(DEFAULT_CHARSET="utf-8")
    assert to_django(busy.answer)["X-Webhook-Outcome"] == "in_progress"
    refused = sync.receive(conn, "github", body, github(f"outcome-{RUN}", body, "sha256=00"), secrets=[SECRET])
    assert refused.answer.outcome is None
    assert "x-webhook-outcome" not in to_starlette(refused.answer).headers
    assert not to_django(refused.answer).has_header("X-Webhook-Outcome")
    # an outcome given by hand wins over none
    assert to_starlette(refused.answer, **{"X-Webhook-Outcome": "x"}).headers["x-webhook-outcome"] == "x"


def test_prepare_receiver_returns_the_error_answer(conn):
    assert sync.prepare_receiver(conn) == sync.http_answer(conn, "error")
    assert sync.prepare_receiver(conn).status == 500


def test_outbox_put_raises_lease_lost_and_with_claim_rolls_back(conn, pool, admin):
    source = f"outbox-{RUN}"
    token = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim(%s, 'k')", (source,)).fetchone()[0]

    def job(c, claim):
        c.execute("INSERT INTO public.py_client_effects VALUES (%s, 1)", (f"{source}/{claim.idem_key}",))
        intent = sync.outbox_put(c, claim, "notify", f"t-{RUN}", {"n": 1}, downstream_idempotent=False)
        assert isinstance(intent, int)
        assert sync.outbox_put(c, claim, "notify", f"t-{RUN}", {"n": 1}) == intent  # one per operation
        return {"intent": intent}

    stale = sync.with_claim(pool, webhook_dedup.Claim(source, "k", uuid.uuid4()), job)
    assert (stale.status, stale.error, stale.state) == ("lease_lost", None, None)
    assert admin.execute("SELECT count(*) FROM webhook_dedup.outbox WHERE source = %s", (source,)).fetchone()[0] == 0
    assert admin.execute("SELECT count(*) FROM public.py_client_effects WHERE idem_key = %s",
                         (f"{source}/k",)).fetchone()[0] == 0  # the write before the put rolled back
    assert admin.execute("SELECT state FROM webhook_dedup.keys WHERE source = %s", (source,)).fetchone()[0] == \
        "processing"  # nothing recorded with webhook_fail

    done = sync.with_claim(pool, webhook_dedup.Claim(source, "k", token), job)
    assert done.status == "completed"
    assert admin.execute("SELECT id, downstream_idempotent, state FROM webhook_dedup.outbox WHERE source = %s",
                         (source,)).fetchone() == (done.result["intent"], False, "pending")

    def raises(c, claim):
        raise webhook_dedup.LeaseLost("a checkpoint returned false")

    token2 = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim(%s, 'k2')", (source,)).fetchone()[0]
    assert sync.with_claim(pool, webhook_dedup.Claim(source, "k2", token2), raises).status == "lease_lost"

    async def scenario():
        async with AsyncConnectionPool(conninfo(user=RECEIVER), min_size=1, max_size=2, open=False) as apool:
            async def ajob(c, claim):
                return {"intent": await aio.outbox_put(c, claim, "notify", f"t-{RUN}", {"n": 2})}
            lost = await aio.with_claim(apool, webhook_dedup.Claim(source, "k2", uuid.uuid4()), ajob)
            ok = await aio.with_claim(apool, webhook_dedup.Claim(source, "k2", token2), ajob)
            async with apool.connection() as c:
                answer = await aio.prepare_receiver(c)
            return lost.status, ok.status, answer.status

    assert asyncio.run(scenario()) == ("lease_lost", "completed", 500)
