"""The calls for psycopg 3's synchronous connections (Django, scripts,
threads). `conn` is a psycopg.Connection in autocommit mode, or a
psycopg_pool.ConnectionPool for the calls that take `pool`."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar, Union

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from . import core
from .core import (AfterWork, Answer, Claim, ClaimLike, ClaimOutcome, Delivery, ErrorHook, HeaderMap, Intent,
                   Interval, Json, LeaseLost, Mode, Outcome, QueuedDelivery, ReceiveOptions, SenderOptions)

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool
    from typing_extensions import Unpack

    #: Any psycopg connection, whatever its row factory.
    Conn = Connection[Any]
    Pool = ConnectionPool[Connection[Any]]

_C = TypeVar("_C", bound=ClaimLike)


def receive(conn: Conn, scheme: str, body: bytes, headers: HeaderMap, **options: Unpack[ReceiveOptions]) -> Delivery:
    """Verify, key and claim (or enqueue) one delivery in one statement:
    webhook_dedup.webhook_receive(scheme, body, headers, ...). `body` is the
    raw request body exactly as received; `headers` every request header.
    Options by their SQL names (source, mode, lease, wait, url, secrets,
    ...); only those given are sent. Run it in autocommit mode, so that the
    claim is committed when it returns. Errors are psycopg's, with the
    SQLSTATE in `sqlstate` (22023 a bad argument, 42501 without
    webhook_dedup_receiver)."""
    sql, params = core.receive_sql(scheme, body, headers, options)
    with conn.cursor(row_factory=dict_row) as cur:
        row = core.one(cur.execute(sql, params).fetchone())
    return core.delivery_of(row, scheme, options.get("source"))


def http_answer(conn: Conn, outcome: Union[Outcome, AfterWork], scheme: Optional[str] = None, result: Json = None,
                retry_after: Optional[Interval] = None, mode: Optional[Mode] = None) -> Answer:
    """webhook_dedup.http_answer: the answer to any outcome, and to what
    became of the work (completed, lease_lost, error)."""
    with conn.cursor(row_factory=dict_row) as cur:
        row = core.one(cur.execute(core.HTTP_ANSWER_SQL,
                                   core.http_answer_params(outcome, scheme, result, retry_after, mode)).fetchone())
    return core.answer_of(row)


def check_installed(conn: Conn) -> None:
    """Raises NotReady, saying what to run or grant, unless the extension is
    there and the current role may call webhook_receive."""
    with conn.cursor(row_factory=dict_row) as cur:
        core.check_row(core.one(cur.execute(core.CHECK_SQL, (core.RECEIVE_SIGNATURE,) * 2).fetchone()))


def prepare_receiver(conn: Conn) -> Answer:
    """What a receiver does at start-up, before it serves: check_installed
    (NotReady saying what to run or grant), then http_answer('error'), the
    answer to send when the database fails later (it cannot be asked then)."""
    check_installed(conn)
    return http_answer(conn, "error")


def outbox_put(conn: Conn, claim: ClaimLike, operation: str, target: str, request: Json,
               max_length: Optional[int] = None, downstream: Optional[str] = None,
               downstream_idempotent: Optional[bool] = None) -> int:
    """webhook_dedup.webhook_outbox_put in the caller's transaction (a
    with_claim job's `conn`): records the downstream call `operation` for
    the senders of `target`, with `request`, while `claim` holds the key.
    Returns the intent's id; raises LeaseLost when the put returns NULL (the
    token no longer holds the key): raised out of the job, with_claim rolls
    back and returns status "lease_lost". Call it first in the job: it
    locks the key's row until the transaction ends."""
    with conn.cursor(row_factory=dict_row) as cur:
        row = core.one(cur.execute(core.PUT_SQL, core.put_params(claim, operation, target, request, max_length,
                                                                 downstream, downstream_idempotent)).fetchone())
    return core.put_result(row, claim)


def with_claim(pool: Pool, claim: _C, job: Callable[[Conn, _C], Json],
               retryable: Union[bool, Callable[[BaseException], bool]] = True) -> ClaimOutcome:
    """Runs job(conn, claim) and webhook_complete in ONE transaction on one
    connection of `pool`: the job's writes and the completion commit
    together or not at all. job returns the result to store (JSON; every
    later duplicate is answered with it). webhook_complete false (another
    worker reclaimed the key): ROLLBACK, status lease_lost. job raises:
    ROLLBACK, then webhook_fail (retryable as given) outside the
    transaction, status failed; an error of webhook_fail itself is raised.
    job raises LeaseLost (outbox_put does when webhook_outbox_put returns
    NULL): ROLLBACK, status lease_lost, nothing recorded."""
    try:
        with pool.connection() as conn:
            with conn.transaction() as tx:
                value = job(conn, claim)
                with conn.cursor(row_factory=dict_row) as cur:
                    done = core.one(cur.execute(core.COMPLETE_SQL, (claim.source, claim.idem_key, claim.claim_token,
                                                                    Jsonb(value), Jsonb(value))).fetchone())
                if not done["completed"]:
                    raise _Rollback()
                return ClaimOutcome("completed", result=done["result"])
    except (_Rollback, LeaseLost):
        return ClaimOutcome("lease_lost")
    except Exception as error:  # noqa: BLE001 - recorded, then returned
        again = retryable(error) if callable(retryable) else retryable
        with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            state = core.one(cur.execute(core.FAIL_SQL, (claim.source, claim.idem_key, claim.claim_token,
                                                         core.error_text(error), again)).fetchone())["state"]
        return ClaimOutcome("failed", error=error, state=state)


class _Rollback(Exception):
    """Leaves conn.transaction() with a ROLLBACK (a lost lease)."""


class Worker(core.WorkerBase):
    """The worker of the persist-then-process mode: takes due deliveries
    with webhook_next (each leased to it; two workers never get one key)
    and calls handler(delivery) on each, usually with_claim. A handler that
    raises has its key recorded with webhook_fail (retryable). stop() ends
    it after the deliveries in hand (they are leased to it)."""

    pool: Pool
    handler: Callable[[QueuedDelivery], object]

    def __init__(self, pool: Pool, handler: Callable[[QueuedDelivery], object], source: Optional[str] = None,
                 lease: Optional[Interval] = None, batch: int = 10, idle_s: float = 0.5,
                 on_error: Optional[ErrorHook] = None):
        super().__init__(pool, handler, source, lease, batch, idle_s, on_error)
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        """The loop, until stop() (call it from another thread or a signal handler)."""
        while not self._stop.is_set():
            try:
                with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
                    rows = cur.execute(core.NEXT_SQL, self.next_params()).fetchall()
            except Exception as error:  # noqa: BLE001 - the database is gone: pause, go on
                self.report(error)
                self._stop.wait(self.idle_s * 4)
                continue
            if not rows:
                self._stop.wait(self.idle_s)
                continue
            for row in rows:
                delivery = core.queued_of(row)
                try:
                    self.handler(delivery)
                except Exception as error:  # noqa: BLE001 - recorded with webhook_fail
                    try:
                        with self.pool.connection() as conn:
                            conn.execute(core.FAIL_SQL, self.fail_params(delivery, error))
                    except Exception as fail_error:  # noqa: BLE001
                        self.report(fail_error)



class OutboxSender(core.OutboxSenderBase):
    """The outbox's sender (docs/outbox.md): takes due intents of `target`
    with webhook_outbox_next (each leased to it, committed before any call:
    no transaction stays open during one) and calls send(intent) for each,
    with no connection held. What send returns is acked
    (webhook_outbox_ack, kept as the intent's response); an exception is
    reported by the failure table (SendError: webhook_outbox_fail, retried
    or dead-lettered, or webhook_outbox_unknown). Options as Worker's:
    lease, batch (default 1), idle_s, on_error(error). stop() ends
    it after the intents in hand (they are leased to it)."""

    pool: Pool
    send: Callable[[Intent], Json]

    def __init__(self, pool: Pool, target: Optional[str], send: Callable[[Intent], Json],
                 **options: Unpack[SenderOptions]):
        super().__init__(pool, target, send, **options)
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        """The loop, until stop() (from another thread or a signal handler)."""
        while not self._stop.is_set():
            try:
                with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
                    rows = cur.execute(core.NEXT_INTENTS_SQL, self.next_params()).fetchall()
            except Exception as error:  # noqa: BLE001 - the database is gone: pause, go on
                self.report(error)
                self._stop.wait(self.idle_s * 4)
                continue
            if not rows:
                self._stop.wait(self.idle_s)
                continue
            for row in rows:  # all of them, even once stopping: they are leased to this sender
                self.send_one(core.intent_of(row))

    def send_one(self, intent: Intent) -> None:
        """One call and its report (a report that fails goes to on_error: the
        lease lapses and the intent is taken again, with the same key)."""
        try:
            value = self.send(intent)
        except Exception as error:  # noqa: BLE001 - reported by the failure table
            _, sql, params = core.report_of(intent, error)
        else:
            sql, params = core.ACK_SQL, (intent.id, intent.lease_token, None if value is None else Jsonb(value))
        try:
            with self.pool.connection() as conn:
                conn.execute(sql, params)
        except Exception as report_error:  # noqa: BLE001
            self.report(report_error)
