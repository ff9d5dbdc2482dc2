"""The calls for psycopg 3's asynchronous connections (FastAPI, Starlette,
asyncio): as webhook_dedup.sync's, each a coroutine. `conn` is a
psycopg.AsyncConnection in autocommit mode, `pool` a
psycopg_pool.AsyncConnectionPool."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional, TypeVar, Union

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from . import core
from .core import (AfterWork, Answer, Claim, ClaimLike, ClaimOutcome, Delivery, ErrorHook, HeaderMap, Intent,
                   Interval, Json, LeaseLost, Mode, Outcome, QueuedDelivery, ReceiveOptions, SenderOptions)

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool
    from typing_extensions import Unpack

    #: Any psycopg asyncio connection, whatever its row factory.
    Conn = AsyncConnection[Any]
    Pool = AsyncConnectionPool[AsyncConnection[Any]]

_C = TypeVar("_C", bound=ClaimLike)


async def receive(conn: Conn, scheme: str, body: bytes, headers: HeaderMap,
                  **options: Unpack[ReceiveOptions]) -> Delivery:
    """webhook_dedup.sync.receive, awaited."""
    sql, params = core.receive_sql(scheme, body, headers, options)
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql, params)
        row = core.one(await cur.fetchone())
    return core.delivery_of(row, scheme, options.get("source"))


async def http_answer(conn: Conn, outcome: Union[Outcome, AfterWork], scheme: Optional[str] = None,
                      result: Json = None, retry_after: Optional[Interval] = None,
                      mode: Optional[Mode] = None) -> Answer:
    """webhook_dedup.sync.http_answer, awaited."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(core.HTTP_ANSWER_SQL, core.http_answer_params(outcome, scheme, result, retry_after, mode))
        row = core.one(await cur.fetchone())
    return core.answer_of(row)


async def check_installed(conn: Conn) -> None:
    """webhook_dedup.sync.check_installed, awaited."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(core.CHECK_SQL, (core.RECEIVE_SIGNATURE,) * 2)
        core.check_row(core.one(await cur.fetchone()))


async def prepare_receiver(conn: Conn) -> Answer:
    """webhook_dedup.sync.prepare_receiver, awaited: check_installed, then
    http_answer('error'), kept for when the database fails."""
    await check_installed(conn)
    return await http_answer(conn, "error")


async def outbox_put(conn: Conn, claim: ClaimLike, operation: str, target: str, request: Json,
                     max_length: Optional[int] = None, downstream: Optional[str] = None,
                     downstream_idempotent: Optional[bool] = None) -> int:
    """webhook_dedup.sync.outbox_put, awaited: the intent's id, or LeaseLost."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(core.PUT_SQL, core.put_params(claim, operation, target, request, max_length, downstream,
                                                        downstream_idempotent))
        row = core.one(await cur.fetchone())
    return core.put_result(row, claim)


class _Rollback(Exception):
    """Leaves conn.transaction() with a ROLLBACK (a lost lease)."""


async def with_claim(pool: Pool, claim: _C, job: Callable[[Conn, _C], Awaitable[Json]],
                     retryable: Union[bool, Callable[[BaseException], bool]] = True) -> ClaimOutcome:
    """webhook_dedup.sync.with_claim, with an async job(conn, claim)."""
    try:
        async with pool.connection() as conn:
            async with conn.transaction():
                value = await job(conn, claim)
                async with conn.cursor(row_factory=dict_row) as cur:
                    await cur.execute(core.COMPLETE_SQL, (claim.source, claim.idem_key, claim.claim_token,
                                                          Jsonb(value), Jsonb(value)))
                    done = core.one(await cur.fetchone())
                if not done["completed"]:
                    raise _Rollback()
                return ClaimOutcome("completed", result=done["result"])
    except (_Rollback, LeaseLost):
        return ClaimOutcome("lease_lost")
    except Exception as error:  # noqa: BLE001 - recorded, then returned
        again = retryable(error) if callable(retryable) else retryable
        async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(core.FAIL_SQL, (claim.source, claim.idem_key, claim.claim_token,
                                              core.error_text(error), again))
            state = core.one(await cur.fetchone())["state"]
        return ClaimOutcome("failed", error=error, state=state)


class _Stoppable:
    """A stop event bound to the loop that runs (made by run())."""

    _stopping = False
    _stop: Optional[asyncio.Event] = None

    def stop(self) -> None:
        self._stopping = True
        if self._stop is not None:
            self._stop.set()

    def _start(self) -> asyncio.Event:
        stop = self._stop = asyncio.Event()
        if self._stopping:
            stop.set()
        return stop

    async def _pause(self, seconds: float) -> None:
        assert self._stop is not None  # made by run(), which alone pauses
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except asyncio.TimeoutError:
            pass


class OutboxSender(_Stoppable, core.OutboxSenderBase):
    """webhook_dedup.sync.OutboxSender for asyncio: `await sender.run()`
    until `sender.stop()`; send(intent) is a coroutine function."""

    pool: Pool
    send: Callable[[Intent], Awaitable[Json]]

    def __init__(self, pool: Pool, target: Optional[str], send: Callable[[Intent], Awaitable[Json]],
                 **options: Unpack[SenderOptions]):
        core.OutboxSenderBase.__init__(self, pool, target, send, **options)

    async def run(self) -> None:
        stop = self._start()
        while not stop.is_set():
            try:
                async with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
                    await cur.execute(core.NEXT_INTENTS_SQL, self.next_params())
                    rows = await cur.fetchall()
            except Exception as error:  # noqa: BLE001 - the database is gone: pause, go on
                self.report(error)
                await self._pause(self.idle_s * 4)
                continue
            if not rows:
                await self._pause(self.idle_s)
                continue
            for row in rows:  # all of them, even once stopping: they are leased to this sender
                await self.send_one(core.intent_of(row))

    async def send_one(self, intent: Intent) -> None:
        try:
            value = await self.send(intent)
        except Exception as error:  # noqa: BLE001 - reported by the failure table
            _, sql, params = core.report_of(intent, error)
        else:
            sql, params = core.ACK_SQL, (intent.id, intent.lease_token, None if value is None else Jsonb(value))
        try:
            async with self.pool.connection() as conn:
                await conn.execute(sql, params)
        except Exception as report_error:  # noqa: BLE001
            self.report(report_error)


class Worker(core.WorkerBase):
    """webhook_dedup.sync.Worker for asyncio: `await worker.run()` until
    `worker.stop()`; handler(delivery) is a coroutine function. It may be
    made outside any event loop (its stop event is made by run(), in the
    loop that runs it); a stopped Worker stays stopped."""

    pool: Pool
    handler: Callable[[QueuedDelivery], Awaitable[object]]

    def __init__(self, pool: Pool, handler: Callable[[QueuedDelivery], Awaitable[object]],
                 source: Optional[str] = None, lease: Optional[Interval] = None, batch: int = 10,
                 idle_s: float = 0.5, on_error: Optional[ErrorHook] = None):
        super().__init__(pool, handler, source, lease, batch, idle_s, on_error)
        self._stopping = False
        self._stop: Optional[asyncio.Event] = None  # made in run(): bound to its loop

    def stop(self) -> None:
        self._stopping = True
        if self._stop is not None:
            self._stop.set()

    async def _pause(self, seconds: float) -> None:
        assert self._stop is not None  # made by run(), which alone pauses
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def run(self) -> None:
        self._stop = asyncio.Event()
        if self._stopping:
            self._stop.set()
        while not self._stop.is_set():
            try:
                async with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
                    await cur.execute(core.NEXT_SQL, self.next_params())
                    rows = await cur.fetchall()
            except Exception as error:  # noqa: BLE001 - the database is gone: pause, go on
                self.report(error)
                await self._pause(self.idle_s * 4)
                continue
            if not rows:
                await self._pause(self.idle_s)
                continue
            for row in rows:  # all of them, even once stopping: they are leased to this worker
                delivery = core.queued_of(row)
                try:
                    await self.handler(delivery)
                except Exception as error:  # noqa: BLE001 - recorded with webhook_fail
                    try:
                        async with self.pool.connection() as conn:
                            await conn.execute(core.FAIL_SQL, self.fail_params(delivery, error))
                    except Exception as fail_error:  # noqa: BLE001
                        self.report(fail_error)

