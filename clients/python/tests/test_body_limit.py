"""Item 2 of issue 41: a body over the limit is refused with 413 without
reading the rest, and never reaches webhook_receive, in both README
receivers served for real (uvicorn, gunicorn): a Content-Length over the
limit (refused before one byte is read) and a chunked body (refused as soon
as it passes the limit). The client sends part of the body only and keeps
the connection open, so an answer can only come from a receiver that did
not wait for the rest; the receivers count the body bytes they read and
their webhook_receive calls."""

import asyncio
import io

import pytest

import webhook_dedup
from webhook_dedup.frameworks import from_django, from_starlette

from conftest import rss_kib, send_partial, signed_github

LIMIT = webhook_dedup.MAX_BODY_BYTES
MIB = 1024 * 1024


@pytest.fixture(params=["fastapi", "django"])
def server(request):
    return request.getfixturevalue(f"{request.param}_server")


def test_the_default_limit_is_the_node_packages():
    assert LIMIT == 25 * 1024 * 1024


def test_a_content_length_over_the_limit_is_refused_before_reading(server):
    before = server.counts()
    body_start = b'{"action": "opened", "padding": "' + b"x" * 4096
    status, headers, body = send_partial(server.port, "/webhooks/github",
                                         {**signed_github("too-large-cl", b"never sent whole"),
                                          "Content-Length": str(200 * MIB)},
                                         [body_start], chunked=False)
    assert (status, headers["content-type"], body) == (413, "application/json", b'{"error": "Payload Too Large"}')
    after = server.counts()
    assert after["body_bytes"] == before["body_bytes"]          # not one byte of the body read
    assert after["receive_calls"] == before["receive_calls"]    # nothing sent to webhook_receive


def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_limit(server):
    before = server.counts()
    rss_before = rss_kib(server.proc.pid)
    sent = LIMIT + 2 * MIB                 # past the limit by more than one read; the rest (and the end) never sent
    chunk = b"y" * (256 * 1024)
    status, _, body = send_partial(server.port, "/webhooks/github", signed_github("too-large-chunked", b"-"),
                                   [chunk] * (sent // len(chunk)), chunked=True)
    assert (status, body) == (413, b'{"error": "Payload Too Large"}')
    after = server.counts()
    read = after["body_bytes"] - before["body_bytes"]
    assert LIMIT < read <= sent                                  # read up to the limit and one chunk, no further
    assert after["receive_calls"] == before["receive_calls"]
    # what it held is bounded by the limit, not by what a client may send
    assert rss_kib(server.proc.pid) - rss_before < 3 * LIMIT // 1024


def test_a_body_within_the_limit_is_read_whole(server):
    """The control: the same receivers take a body under the limit (a
    forged one: refused by the signature, after webhook_receive read it)."""
    before = server.counts()
    body = b'{"action": "opened", "pad": "' + b"z" * (3 * MIB) + b'"}'   # over Django's DATA_UPLOAD_MAX_MEMORY_SIZE
    status, _, _ = server.request("POST", "/webhooks/github", body,
                                  signed_github("forged-big", body, secret="not the key"))
    assert status == 401
    after = server.counts()
    assert after["body_bytes"] - before["body_bytes"] == len(body)
    assert after["receive_calls"] == before["receive_calls"] + 1


class FakeStream:
    """A request body in chunks, recording how many were taken."""

    def __init__(self, chunks):
        self.chunks, self.taken = chunks, 0

    async def stream(self):
        for chunk in self.chunks:
            self.taken += 1
            yield chunk


def test_from_starlette_stops_at_the_first_chunk_past_the_limit():
    class Request(FakeStream):
        def __init__(self, chunks, headers):
            super().__init__(chunks)
            self.headers = headers

    chunked = Request([b"a" * 10] * 100, {})
    with pytest.raises(webhook_dedup.BodyTooLarge) as refused:
        asyncio.run(from_starlette(chunked, limit=25))
    assert (chunked.taken, refused.value.status, refused.value.answer.status) == (3, 413, 413)
    declared = Request([b"a" * 10], {"content-length": "26"})
    with pytest.raises(webhook_dedup.BodyTooLarge):
        asyncio.run(from_starlette(declared, limit=25))
    assert declared.taken == 0
    exact = Request([b"a" * 10, b"b" * 15], {})
    assert asyncio.run(from_starlette(exact, limit=25))[0] == b"a" * 10 + b"b" * 15


def test_from_django_refuses_a_length_before_reading_and_a_terminated_stream_past_the_limit():
    from django.conf import settings
    if not settings.configured:
        settings.configure(DEFAULT_CHARSET="utf-8")
    from django.test import RequestFactory

    class Unreadable(io.RawIOBase):
        def read(self, *args):
            raise AssertionError("read")

    request = RequestFactory().post("/", data=b"", content_type="application/json")
    request.META["CONTENT_LENGTH"] = "26"
    request._stream = Unreadable()
    with pytest.raises(webhook_dedup.BodyTooLarge):
        from_django(request, limit=25)

    class Counted(io.BytesIO):
        taken = 0

        def read(self, n=-1):
            self.taken += 1
            return super().read(min(n, 10))

    chunked = RequestFactory().post("/", data=b"", content_type="application/json")
    chunked.META.pop("CONTENT_LENGTH", None)
    chunked.META["wsgi.input"] = stream = Counted(b"c" * 1000)
    chunked.META["wsgi.input_terminated"] = True
    with pytest.raises(webhook_dedup.BodyTooLarge):
        from_django(chunked, limit=25)
    assert stream.taken == 3
    whole = RequestFactory().post("/", data=b"\x00\xff" * 20, content_type="application/octet-stream")
    assert from_django(whole, limit=40)[0] == b"\x00\xff" * 20
