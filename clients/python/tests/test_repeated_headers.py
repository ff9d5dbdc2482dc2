"""Issue 41, item 6: a header sent twice, through the package's helpers on
real servers (docs/signatures.md, "Repeated headers"). The README's FastAPI
receiver (from_starlette, on uvicorn) gets two X-GitHub-Delivery lines:
400, `{"error": "repeated header"}`, nothing stored; two X-Hub-Signature-256
lines (one good, one bad, either order): 401, nothing stored; the same
delivery with each header once: claimed and processed (the control). The
README's Django receiver (from_django, on gunicorn) gets the header joined
with "," by the WSGI server: a doubled signature is one value that does not
decode (401), a doubled id one odd id that is keyed on as it is."""

import asyncio
import hashlib
import hmac
import json
import socket
import uuid
from pathlib import Path

import pytest

from webhook_dedup import sync
from webhook_dedup.frameworks import from_starlette

from conftest import GITHUB_SECRET, Served, app_env, free_port, python, read_response

RUN = uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def fastapi_server(app_db, tmp_path_factory):
    """The README's FastAPI receiver on uvicorn, as conftest's, of this
    module's own (a server whose pool met a test that cut its connections
    would answer 500 once per dead connection)."""
    port = free_port()
    server = Served([python(), "-m", "uvicorn", "counted_fastapi:app", "--host", "127.0.0.1", "--port", str(port),
                     "--no-access-log"], app_env(app_db), port, tmp_path_factory.mktemp("fastapi-repeated") / "log")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def django_server(app_db, tmp_path_factory):
    """The README's Django receiver on gunicorn (one worker), of this module's own."""
    port = free_port()
    gunicorn = str(Path(python()).parent / "gunicorn")
    server = Served([gunicorn, "--bind", f"127.0.0.1:{port}", "--workers", "1", "counted_django:application"],
                    app_env(app_db, ALLOWED_HOSTS="127.0.0.1"), port,
                    tmp_path_factory.mktemp("django-repeated") / "log")
    yield server
    server.stop()


def sign(body: bytes, secret: str = GITHUB_SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def delivery(name: str):
    """A GitHub delivery of its own: its id, a body no other test sends (the
    replay guard keys a body seen before under another id to that id), and
    its good signature."""
    delivery_id = f"{name}-{RUN}"
    body = json.dumps({"action": "opened", "issue": {"title": delivery_id}}).encode()
    return delivery_id, body, sign(body)


def send(port: int, body: bytes, pairs) -> tuple:
    """POSTs `body` to the receiver with `pairs` as header lines exactly (a
    name given twice is sent twice); (status, headers, body)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        head = f"POST /webhooks/github HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n" \
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in pairs)
        sock.sendall(head.encode() + b"\r\n" + body)
        return read_response(sock)
    finally:
        sock.close()


def once(delivery_id: str, signature: str) -> list:
    return [("X-GitHub-Event", "issues"), ("X-GitHub-Delivery", delivery_id), ("X-Hub-Signature-256", signature)]


def stored(admin, body: bytes, *ids: str) -> dict:
    """What the database holds of a delivery: the keys of `ids` (source
    github), the replay guard of its body, the job's rows."""
    keys = [admin.execute("SELECT idem_key, state FROM webhook_dedup.keys WHERE source = 'github'"
                          " AND idem_key = webhook_dedup.webhook_key('github', %s)", (i,)).fetchone() for i in ids]
    guard = admin.execute("SELECT idem_key FROM webhook_dedup.replay_guards WHERE source = 'github'"
                          " AND body_sha256 = sha256(%s)", (body,)).fetchone()
    events = admin.execute("SELECT count(*) FROM public.events WHERE idem_key IN"
                           " (SELECT webhook_dedup.webhook_key('github', i) FROM unnest(%s::text[]) AS i)",
                           (list(ids),)).fetchone()[0]
    return {"keys": keys, "guard": guard[0] if guard else None, "events": events}


def answer_of(admin, outcome: str) -> tuple:
    status, headers, body = admin.execute("SELECT * FROM webhook_dedup.http_answer(%s, 'github')",
                                          (outcome,)).fetchone()
    return status, headers, body


def assert_claimed(server, admin, delivery_id: str, body: bytes, signature: str):
    """The control: the delivery with each header once is claimed, its job
    runs, and the answer is the job's result."""
    status, headers, answer = send(server.port, body, once(delivery_id, signature))
    assert (status, json.loads(answer), headers["x-webhook-outcome"]) == (200, {"status": "processed"}, "claimed")
    now = stored(admin, body, delivery_id)
    key = now["keys"][0]
    assert key is not None and key[1] == "completed"
    assert (now["guard"], now["events"]) == (key[0], 1)    # the body's guard and the job's row, under its key


# FastAPI (from_starlette on uvicorn): the values arrive apart

def test_starlette_an_id_header_sent_twice_is_refused_with_400_and_nothing_is_stored(fastapi_server, app_admin):
    delivery_id, body, signature = delivery("starlette-two-ids")
    calls = fastapi_server.counts()["receive_calls"]
    status, headers, answer = send(fastapi_server.port, body, [
        ("X-GitHub-Event", "issues"), ("X-GitHub-Delivery", delivery_id), ("X-GitHub-Delivery", f"{delivery_id}-b"),
        ("X-Hub-Signature-256", signature)])
    want_status, want_headers, want_body = answer_of(app_admin, "repeated_header")
    assert (status, json.loads(answer)) == (400, {"error": "repeated header"}) == (want_status, want_body)
    assert headers["content-type"] == want_headers["Content-Type"]
    assert "x-webhook-outcome" not in headers                   # refused before a claim: no outcome
    assert fastapi_server.counts()["receive_calls"] == calls + 1  # webhook_receive answered it
    assert stored(app_admin, body, delivery_id, f"{delivery_id}-b") == {"keys": [None, None], "guard": None,
                                                                       "events": 0}
    assert_claimed(fastapi_server, app_admin, delivery_id, body, signature)


@pytest.mark.parametrize("order", ["good first", "bad first"])
def test_starlette_a_signature_header_sent_twice_is_refused_with_401_and_nothing_is_stored(
        fastapi_server, app_admin, order):
    delivery_id, body, signature = delivery(f"starlette-two-signatures-{order.replace(' ', '-')}")
    bad = sign(body, "not the secret")
    signatures = [signature, bad] if order == "good first" else [bad, signature]
    status, headers, answer = send(fastapi_server.port, body, [
        ("X-GitHub-Event", "issues"), ("X-GitHub-Delivery", delivery_id)]
        + [("X-Hub-Signature-256", s) for s in signatures])
    assert (status, json.loads(answer)) == (401, {"error": "invalid signature"})
    assert (status, json.loads(answer)) == answer_of(app_admin, "rejected")[::2]
    assert "x-webhook-outcome" not in headers
    assert stored(app_admin, body, delivery_id) == {"keys": [None], "guard": None, "events": 0}
    assert_claimed(fastapi_server, app_admin, delivery_id, body, signature)


def test_starlette_the_same_delivery_with_each_header_once_is_claimed(fastapi_server, app_admin):
    delivery_id, body, signature = delivery("starlette-control")
    assert stored(app_admin, body, delivery_id)["keys"] == [None]
    assert_claimed(fastapi_server, app_admin, delivery_id, body, signature)
    status, headers, answer = send(fastapi_server.port, body, once(delivery_id, signature))
    assert (status, json.loads(answer), headers["x-webhook-outcome"]) == (200, {"status": "processed"}, "duplicate")


def test_from_starlette_gives_a_list_and_webhook_receive_names_the_reason(app_admin):
    """The reject reasons themselves, from a Starlette Request whose ASGI
    scope carries each header twice (as uvicorn passes them)."""
    from starlette.requests import Request

    source = f"starlette-reasons-{RUN}"
    delivery_id, body, signature = delivery("starlette-reasons")
    bad = sign(body, "not the secret")

    def request(pairs):
        raw = [(b"content-type", b"application/json")] + [(n.lower().encode(), v.encode()) for n, v in pairs]
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        return Request({"type": "http", "method": "POST", "path": "/", "headers": raw}, receive)

    two_ids = asyncio.run(from_starlette(request([("X-GitHub-Event", "issues"), ("X-GitHub-Delivery", delivery_id),
                                                  ("X-GitHub-Delivery", "other"),
                                                  ("X-Hub-Signature-256", signature)])))
    assert two_ids[0] == body and two_ids[1]["x-github-delivery"] == [delivery_id, "other"]
    refused = sync.receive(app_admin, "github", *two_ids, secrets=[GITHUB_SECRET], source=source)
    assert (refused.verified, refused.reject_reason, refused.outcome, refused.answer.status) == \
        (True, "repeated_header", None, 400)

    two_signatures = asyncio.run(from_starlette(request([("X-GitHub-Event", "issues"),
                                                         ("X-GitHub-Delivery", delivery_id),
                                                         ("X-Hub-Signature-256", bad),
                                                         ("X-Hub-Signature-256", signature)])))
    assert two_signatures[1]["x-hub-signature-256"] == [bad, signature]
    forged = sync.receive(app_admin, "github", *two_signatures, secrets=[GITHUB_SECRET], source=source)
    assert (forged.verified, forged.reject_reason, forged.answer.status) == (False, "malformed_header", 401)
    assert app_admin.execute("SELECT count(*) FROM webhook_dedup.keys WHERE source = %s",
                             (source,)).fetchone()[0] == 0


# Django (from_django on gunicorn): the WSGI server joins the values with ","

def test_django_a_signature_header_sent_twice_arrives_joined_and_is_refused_with_401(django_server, app_admin):
    delivery_id, body, signature = delivery("django-two-signatures")
    bad = sign(body, "not the secret")
    status, headers, answer = send(django_server.port, body, [
        ("X-GitHub-Event", "issues"), ("X-GitHub-Delivery", delivery_id),
        ("X-Hub-Signature-256", signature), ("X-Hub-Signature-256", bad)])
    # one value, f"{signature},{bad}", whose hex does not decode
    assert (status, json.loads(answer)) == (401, {"error": "invalid signature"})
    assert stored(app_admin, body, delivery_id) == {"keys": [None], "guard": None, "events": 0}
    assert_claimed(django_server, app_admin, delivery_id, body, signature)


def test_django_an_id_header_sent_twice_arrives_as_one_odd_id(django_server, app_admin):
    """from_django cannot see the repeat: the joined text is the id, and the
    delivery is claimed under it (docs/signatures.md, "Joined values")."""
    delivery_id, body, signature = delivery("django-two-ids")
    status, headers, answer = send(django_server.port, body, [
        ("X-GitHub-Event", "issues"), ("X-GitHub-Delivery", delivery_id), ("X-GitHub-Delivery", f"{delivery_id}-b"),
        ("X-Hub-Signature-256", signature)])
    assert (status, json.loads(answer), headers["x-webhook-outcome"]) == (200, {"status": "processed"}, "claimed")
    joined, first, second = stored(app_admin, body, f"{delivery_id},{delivery_id}-b", delivery_id,
                                   f"{delivery_id}-b")["keys"]
    assert joined is not None and joined[1] == "completed"
    assert (first, second) == (None, None)
    # the genuine delivery afterwards: its body is known under the odd id,
    # so the replay guard answers it from that key (processed once)
    status, headers, answer = send(django_server.port, body, once(delivery_id, signature))
    assert (status, json.loads(answer), headers["x-webhook-outcome"]) == (200, {"status": "processed"}, "duplicate")
    assert stored(app_admin, body, delivery_id)["keys"] == [None]
