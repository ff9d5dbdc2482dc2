"""A webhook receiver in FastAPI whose correctness lives in SQL (webhook_dedup).

Providers deliver *at least once*: they retry on timeouts and non-2xx
answers, sometimes send the same delivery twice at the same moment, and
anyone can POST to your URL. This receiver makes every valid event take
effect exactly once with two kinds of SQL calls (examples/README.md is the
contract it follows):

1. One webhook_receive call verifies the signature over the exact raw body
   bytes with the keys stored in the database (this app holds no secret),
   derives the idempotency key from the provider's event id and claims it
   (or, with WEBHOOK_MODE=enqueue, stores it for worker.py). It runs as its
   own autocommitted statement, so other workers see the claim at once.
   Its row also carries the HTTP answer the database computed:
   http_status, http_headers and response (the JSON body). This app sends
   exactly those and decides no status itself.
2. For a claimed key, the job (job.py): two steps, each committing its own
   writes together with webhook_checkpoint / webhook_complete in ONE
   transaction, then the row's http_status and http_headers with the job's
   result as the body. If this process dies in between, the lease expires,
   the provider's retry reclaims the key and the job resumes after the last
   step done.

Every answer to a delivery carries an X-Webhook-Outcome header naming the
outcome (to_starlette adds it from the answer; only for the tests and the
curious), and a resumed job X-Webhook-Resumed-From.

Run: see README.md (PGHOST etc. select the database, PORT the port).
"""

import asyncio
import dataclasses
import logging
import os
import sys
from contextlib import asynccontextmanager
from typing import Optional

import psycopg
import uvicorn
from fastapi import FastAPI, Request, Response
from psycopg.rows import namedtuple_row
from psycopg_pool import AsyncConnectionPool
from webhook_dedup import Answer, BodyTooLarge, NotReady, aio
from webhook_dedup.frameworks import from_starlette, to_starlette

import job

PROVIDERS = {"github", "stripe", "standard"}  # the route's {provider}, also the scheme
# Schemes whose signature covers the request URL (docs/sql-reference.md).
# webhook_receive refuses a url for any other scheme (SQLSTATE 22023), so it
# gets NULL for github, stripe and standard. (HubSpot also signs the method:
# add `method => request.method` to the call when you add it.)
URL_SIGNED = {"twilio", "square", "hubspot"}

LEASE = os.environ.get("WEBHOOK_LEASE")  # e.g. '30 seconds'; None: the extension's default
# How long a copy of a delivery another worker is processing waits for it,
# e.g. '2 seconds', '0' not at all; None: the provider's default_wait.
WAIT = os.environ.get("WEBHOOK_WAIT") or None
MODE = os.environ.get("WEBHOOK_MODE", "claim")  # or 'enqueue': persist, answer at once, worker.py processes
FAULT_INJECTION = os.environ.get("WEBHOOK_FAULT_INJECTION") == "1"  # tests only
FAULT_HEADER = "x-demo-fault"

log = logging.getLogger("webhook_dedup.example")


POOL_OPEN_TIMEOUT_S = 10


class StartupError(Exception):
    """The database cannot serve this app: the message says why and what to do."""


def one_line(exc: Exception) -> str:
    """libpq's message on one line (it spreads some over several: "...
    failed:\n\tIs the server running ...")."""
    return " ".join(str(exc).split())


async def check_database() -> Answer:
    """Fail fast at start-up: one plain connection (libpq's error at once when
    the server, the database or the role does not exist, where the pool would
    keep retrying), then the client package's check of webhook_receive (the
    extension there, the role allowed to call it). Returns
    webhook_dedup.http_answer('error'), the answer to a database error: when
    the database fails, it cannot be asked."""
    try:
        conn = await psycopg.AsyncConnection.connect("", autocommit=True)
    except psycopg.Error as exc:
        raise StartupError(f"cannot connect to the database: {one_line(exc)}") from None
    try:
        async with conn:
            await aio.check_installed(conn)
            return await aio.http_answer(conn, "error")  # the same for every provider
    except NotReady as exc:
        raise StartupError(str(exc)) from None
    except psycopg.Error as exc:
        raise StartupError(f"cannot probe the database for webhook_dedup: {one_line(exc)}") from None


# Set when the check ran before the server started (__main__ below): the
# answer to a database error it read.
ERROR_ANSWER = None


@asynccontextmanager
async def lifespan(app: FastAPI):
    app.state.error_answer = ERROR_ANSWER
    if ERROR_ANSWER is None:
        # Served by another command (`uvicorn app:app`, ...): the same check,
        # but a refusal here reaches the user as the server reports a failed
        # start-up: uvicorn logs Starlette's traceback of it and exits with 3.
        try:
            app.state.error_answer = await check_database()
        except StartupError as exc:
            log.error("cannot start: %s", exc)
            raise
    # One pool for the app. conninfo "" means libpq's environment variables
    # (PGHOST, PGPORT, PGUSER, PGDATABASE). Autocommit: each statement commits
    # on its own unless we open a transaction (conn.transaction()).
    pool = AsyncConnectionPool("", min_size=2, max_size=10, open=False,
                               kwargs={"autocommit": True, "row_factory": namedtuple_row})
    # The check above connected, so the pool's connections should come at
    # once. psycopg_pool retries a connection that fails (it cannot tell a
    # missing database from a server restarting) until this timeout: hence the
    # check's single plain connection, which fails at once with libpq's error.
    await pool.open(wait=True, timeout=POOL_OPEN_TIMEOUT_S)
    app.state.pool = pool
    yield
    await pool.close()


app = FastAPI(lifespan=lifespan)


def answer(computed: Answer, body=None, resumed_from: Optional[str] = None) -> Response:
    """The answer the database computed (webhook_receive's, http_answer's),
    or `body` (our own result, after the job) in place of its body, sent
    exactly (to_starlette: its status, its headers, the JSON body with sorted
    keys, so that a duplicate's body is byte-identical to the first
    answer's). X-Webhook-Outcome and X-Webhook-Resumed-From are only for
    the tests and the curious."""
    extra = {}
    if resumed_from:
        extra["X-Webhook-Resumed-From"] = resumed_from
    if body is not None:
        computed = dataclasses.replace(computed, body=body)
    return to_starlette(computed, **extra)


JSON = {"Content-Type": "application/json"}


@app.get("/healthz")
async def healthz() -> Response:
    # Served only once the lifespan above has opened the pool.
    return answer(Answer(200, JSON, {"status": "ok"}))


@app.post("/webhooks/{provider}")
async def receive(provider: str, request: Request) -> Response:
    if provider not in PROVIDERS:
        return answer(Answer(404, JSON, {"error": "unknown provider"}))
    # The exact bytes the provider signed, never a parse of them serialised
    # again, and every header, a repeated one as the list of its values
    # (from_starlette), at most 25 MB (GitHub's cap): a larger body is
    # answered 413 without reading the rest of it.
    try:
        body, headers = await from_starlette(request)
    except BodyTooLarge as refused:
        return answer(refused.answer)
    # The URL as the provider called it (scheme://host:port/path?query). Behind
    # a TLS-terminating proxy, let uvicorn trust its X-Forwarded-* headers
    # (--forwarded-allow-ips) so the scheme and host are the public ones.
    url = str(request.url) if provider in URL_SIGNED else None
    try:
        async with request.app.state.pool.connection() as conn:
            # One autocommitted statement (aio.receive: the body as bytea,
            # the headers as jsonb, the options by name).
            delivery = await aio.receive(conn, provider, body, headers, url=url, lease=LEASE, mode=MODE,
                                         wait=WAIT)
            if delivery.must_process:
                return await process(conn, provider, delivery, body, request)
            # Every other outcome, and every refusal (outcome NULL), is
            # answered as the database says (examples/README.md's table).
            return answer(delivery.answer)
    except Exception:  # noqa: BLE001 - a database error or a bug: the same answer
        # A provider retries a 5xx, which is what we want for a transient
        # database problem. The details go to our log, never to the caller.
        log.exception("error on a %s delivery", provider)
        return answer(request.app.state.error_answer)


async def process(conn, provider: str, delivery, body: bytes, request: Request) -> Response:
    """We hold the claim: run the job (job.py), then answer the claim's
    http_status and http_headers with its result."""
    fault = None
    if FAULT_INJECTION and delivery.attempt == 1:  # so that the provider's retry succeeds
        fault = request.headers.get(FAULT_HEADER)
    work = job.Job(provider, delivery.idem_key, delivery.claim_token, delivery.attempt, delivery.last_step,
                   delivery.event_type, delivery.event_time, body)
    result = await job.run(conn, work, fault)
    if result is None:
        # Our lease expired and another worker reclaimed the key; our step was
        # rolled back. The provider's retry will get that worker's answer.
        lost = await aio.http_answer(conn, "lease_lost", scheme=provider)
        return answer(dataclasses.replace(lost, outcome=delivery.outcome))
    resumed = job.NOTIFIED if delivery.last_step == job.NOTIFIED else None
    return answer(delivery.answer, body=result, resumed_from=resumed)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    # Checked before uvicorn starts, so that a refusal is one line on stderr
    # and exit status 1, as Express and Sinatra print theirs (raised in the
    # lifespan, it would come wrapped in a traceback).
    try:
        ERROR_ANSWER = asyncio.run(check_database())
    except StartupError as exc:
        sys.exit(f"cannot start: {exc}")
    uvicorn.run(app, host=os.environ.get("HOST", "127.0.0.1"), port=int(os.environ.get("PORT", "8000")))
