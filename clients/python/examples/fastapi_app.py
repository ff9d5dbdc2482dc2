import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from psycopg_pool import AsyncConnectionPool
from webhook_dedup import BodyTooLarge, aio, answer_after
from webhook_dedup.frameworks import from_starlette, to_starlette

# libpq's PG* variables; opened by the lifespan, inside the running event loop
pool = AsyncConnectionPool("", kwargs={"autocommit": True}, open=False)


@asynccontextmanager
async def lifespan(app: FastAPI):
    await pool.open(wait=True)
    async with pool.connection() as conn:
        # NotReady says what to run or grant; the answer to a database error
        # is read now, while the database answers
        app.state.error_answer = await aio.prepare_receiver(conn)
    yield
    await pool.close()


app = FastAPI(lifespan=lifespan)


async def job(conn, claim):
    # your work, in the claim's transaction: it commits with webhook_complete or not at all
    await conn.execute("INSERT INTO events (idem_key) VALUES (%s)", (claim.idem_key,))
    return {"status": "processed"}                          # stored, answered to every copy


@app.post("/webhooks/github")
async def github(request: Request):
    try:
        body, headers = await from_starlette(request)       # the exact bytes (25 MB at most), every header
    except BodyTooLarge as refused:
        return to_starlette(refused.answer)                 # 413; the rest of the body is never read
    try:
        async with pool.connection() as conn:
            delivery = await aio.receive(conn, "github", body, headers, lease="30 seconds")
        if not delivery.must_process:
            return to_starlette(delivery.answer)            # duplicate, conflict, 401, 503 in progress, ...
        done = await aio.with_claim(pool, delivery, job)    # the job must end within the lease
        if done.status == "completed":
            return to_starlette(answer_after(delivery, done.result))
        if done.status == "lease_lost":                     # another worker took the key over
            async with pool.connection() as conn:
                return to_starlette(await aio.http_answer(conn, "lease_lost", scheme="github"))
        return to_starlette(app.state.error_answer)         # the job failed: 500, the provider retries
    except Exception:                                       # the database failed: the answer read at start-up
        logging.exception("a GitHub delivery")
        return to_starlette(app.state.error_answer)
