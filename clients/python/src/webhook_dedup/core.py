"""What the sync and async APIs share: the SQL, its parameters, and the rows
read into typed values. Nothing here talks to the database."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import (Any, Callable, Dict, Iterable, List, Literal, Mapping, Optional, Protocol, Tuple, TypedDict,
                    TypeVar, Union)
from uuid import UUID

from psycopg.types.json import Jsonb

#: A JSON value as psycopg returns jsonb (and as Jsonb sends it): None,
#: bool, int, float, str, lists and dicts of them.
Json = Any
#: A request's headers as webhook_receive takes them: names (any case) to a
#: value, or to the list of values of a header sent more than once.
HeaderMap = Mapping[str, Union[str, List[str]]]
#: A PostgreSQL interval: its text ('30 seconds') or a timedelta.
Interval = Union[str, timedelta]
#: The parameters of a statement.
Params = Tuple[Any, ...]

#: What webhook_receive made of a delivery (its `outcome`; webhook_claim's
#: outcomes, and in enqueue mode accepted; docs/sql-reference.md). claimed
#: and reclaimed are the caller's to process; the others are answered as
#: they are. None (no outcome): refused, see RejectReason.
Outcome = Literal["claimed", "reclaimed", "in_progress", "duplicate", "conflict", "retry_later",
                  "unknown_outcome", "dead_lettered", "accepted", "handshake", "ignored"]
#: Why webhook_receive refused a delivery (its `reject_reason`): the
#: signature did not verify (the reasons of webhook_verify_detail), its
#: signed token came before with other content, a handshake that could
#: sign a forged delivery, or (verified) no event id or a repeated id, type
#: or time header.
RejectReason = Literal["missing_header", "malformed_header", "unsupported_version", "no_matching_signature",
                       "timestamp_too_old", "timestamp_too_new", "token_reused", "refused_handshake",
                       "missing_event_id", "repeated_header"]
#: What http_answer answers beside an Outcome: what became of the work
#: (completed, lease_lost), the database failing (error), or a refusal.
AfterWork = Literal["completed", "lease_lost", "error", "rejected", "missing_event_id", "repeated_header",
                    "refused_handshake"]
#: webhook_receive's (and http_answer's) mode.
Mode = Literal["claim", "enqueue"]
#: What became of with_claim's work.
ClaimStatus = Literal["completed", "lease_lost", "failed"]
#: A key's state after webhook_fail (None from it: a stale token).
FailState = Literal["failed", "dead_lettered"]
#: How an OutboxSender reports a failed call (report_of).
Report = Literal["failed", "dead_lettered", "unknown"]
#: An on_error hook: called with the error.
ErrorHook = Callable[[BaseException], object]

#: Outcomes a caller must process (it holds the key's lease).
MUST_PROCESS: Tuple[Outcome, ...] = ("claimed", "reclaimed")

_T = TypeVar("_T")


def one(row: Optional[_T]) -> _T:
    """The row of a SELECT of one function call (every statement here is
    one, and returns exactly one row)."""
    if row is None:
        raise RuntimeError("webhook_dedup: the statement returned no row")
    return row


class ReceiveOptions(TypedDict, total=False):
    """webhook_receive's options, by their SQL names (docs/sql-reference.md):
    the keyword arguments of sync.receive and aio.receive. Only those given
    (and not None) are sent; the extension's defaults apply to the rest."""
    #: The verification keys (a list, never one string); not given: the
    #: source's stored keys (webhook_dedup.add_secret).
    secrets: Optional[Union[List[str], Tuple[str, ...]]]
    #: The source (default: the scheme's name).
    source: Optional[str]
    environment: Optional[str]
    account: Optional[str]
    operation: Optional[str]
    #: claim (process now) or enqueue (store for webhook_next).
    mode: Optional[Mode]
    #: How long the holder has; not given: the source's lease.
    lease: Optional[Interval]
    body_key_fallback: Optional[bool]
    tolerance: Optional[Interval]
    #: The URL the provider called, for twilio, square, hubspot (and X's CRC).
    url: Optional[str]
    signature_header: Optional[str]
    signature_prefix: Optional[str]
    algorithm: Optional[str]
    encoding: Optional[str]
    method: Optional[str]
    #: How long a copy of a delivery being processed waits for its holder
    #: ('0': not at all); not given: the provider's.
    wait: Optional[Interval]


class SenderOptions(TypedDict, total=False):
    """The keyword options of sync.OutboxSender and aio.OutboxSender
    (OutboxSenderBase's)."""
    #: Each intent's lease; None: its source's lease.
    lease: Optional[Interval]
    #: Intents per webhook_outbox_next, 1..1000 (default 1).
    batch: int
    #: The pause when nothing is due, in seconds (default 0.5).
    idle_s: float
    #: Called with the error when webhook_outbox_next or a report fails.
    on_error: Optional[ErrorHook]


class ClaimLike(Protocol):
    """What with_claim and outbox_put read of a claim: a Claim, a
    QueuedDelivery or a Delivery (whose key and token are set when it
    must be processed)."""

    @property
    def source(self) -> str: ...

    @property
    def idem_key(self) -> Optional[str]: ...

    @property
    def claim_token(self) -> Optional[UUID]: ...


@dataclass(frozen=True)
class Answer:
    """The HTTP answer the database computed: status, headers (names to
    string values, Content-Type among them) and the JSON body. `outcome`
    is the delivery's outcome this answers (webhook_receive's `outcome`:
    claimed, duplicate, in_progress, ...; None for a refusal and for
    http_answer's answers): to_starlette and to_django send it as the
    X-Webhook-Outcome header."""
    status: int
    headers: Dict[str, str]
    body: Json
    outcome: Optional[Outcome] = None

    def body_bytes(self) -> bytes:
        """The body as JSON bytes, as every helper here sends it; keys sorted,
        so that a duplicate's body (the stored result read back from jsonb,
        which keeps its own key order) is byte for byte the first answer's."""
        return json.dumps(self.body, sort_keys=True).encode()


@dataclass(frozen=True)
class Delivery:
    """A delivery as webhook_receive answered it (docs/sql-reference.md)."""
    verified: bool
    #: Why it was refused; None when it was not.
    reject_reason: Optional[RejectReason]
    #: None for a refusal.
    outcome: Optional[Outcome]
    source: str
    scheme: str
    idem_key: Optional[str]
    #: Set for claimed and reclaimed (the caller holds the key).
    claim_token: Optional[UUID]
    attempt: Optional[int]
    #: The stored result of a duplicate.
    result: Json
    event_type: Optional[str]
    #: The provider's event time (timezone-aware), None when it sends none.
    event_time: Optional[datetime]
    #: Where a reclaim resumes (the last webhook_checkpoint's step).
    last_step: Optional[str]
    #: Which key verified it (its position in `secrets`, or the stored key's id).
    secret_index: Optional[int]
    #: The answer for this outcome; for claimed and reclaimed its body is
    #: None: answer with answer_after once the work committed.
    answer: Answer

    @property
    def must_process(self) -> bool:
        """True when the caller holds the key and must do the work."""
        return self.outcome in MUST_PROCESS


@dataclass(frozen=True)
class Claim:
    """A key the caller holds (from webhook_receive, webhook_claim or webhook_next)."""
    source: str
    idem_key: str
    claim_token: UUID
    attempt: Optional[int] = None
    last_step: Optional[str] = None


@dataclass(frozen=True)
class QueuedDelivery(Claim):
    """A delivery webhook_next handed out, leased to the worker."""
    payload: Optional[bytes] = None
    event_type: Optional[str] = None
    headers: Json = None


@dataclass(frozen=True)
class ClaimOutcome:
    """What became of the work of with_claim: status "completed" (result:
    the stored result), "lease_lost" (the lease expired and another worker
    reclaimed the key: the job's writes were rolled back), or "failed" (the
    job raised: rolled back and recorded with webhook_fail, whose new state
    is `state`: failed, dead_lettered, or None for a stale token)."""
    status: ClaimStatus
    result: Json = None
    error: Optional[BaseException] = None
    state: Optional[FailState] = None


# webhook_receive's options by their SQL names, with their types.
OPTIONS: Tuple[Tuple[str, str], ...] = (
    ("secrets", "text[]"), ("source", "text"), ("environment", "text"), ("account", "text"),
    ("operation", "text"), ("mode", "text"), ("lease", "interval"), ("body_key_fallback", "boolean"),
    ("tolerance", "interval"), ("url", "text"), ("signature_header", "text"), ("signature_prefix", "text"),
    ("algorithm", "text"), ("encoding", "text"), ("method", "text"), ("wait", "interval"),
)
_OPTION_TYPES = dict(OPTIONS)


def receive_sql(scheme: str, body: Union[bytes, bytearray, memoryview], headers: HeaderMap,
                options: Mapping[str, Any]) -> Tuple[str, List[Any]]:
    """The webhook_receive call: the body as bytea (psycopg sends bytes as
    binary bytea: every byte as it is), the headers as jsonb (Jsonb: a dict
    is not adapted to jsonb by itself), and only the options given, by name
    (the extension's defaults apply to the rest). TypeError for an option
    webhook_receive does not have."""
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise TypeError("webhook_dedup: the body must be the raw bytes as received, not " + type(body).__name__)
    if isinstance(options.get("secrets"), (str, bytes)):
        raise TypeError("webhook_dedup: secrets is a list of keys, not one string")
    unknown = set(options) - set(_OPTION_TYPES)
    if unknown:
        raise TypeError(f"webhook_dedup: webhook_receive has no option {', '.join(sorted(unknown))}")
    params: List[Any] = [scheme, bytes(body), Jsonb(dict(headers))]
    named = []
    for name, sql_type in OPTIONS:
        value = options.get(name)
        if value is None:
            continue
        params.append(list(value) if name == "secrets" else value)
        named.append(f", {name} => %s::{sql_type}")
    sql = "SELECT * FROM webhook_dedup.webhook_receive(%s, %s::bytea, %s::jsonb" + "".join(named) + ")"
    return sql, params


def delivery_of(row: Mapping[str, Any], scheme: str, source: Optional[str]) -> Delivery:
    """A webhook_receive row (a dict row) as a Delivery."""
    return Delivery(
        verified=row["verified"], reject_reason=row["reject_reason"], outcome=row["outcome"],
        source=source or scheme, scheme=scheme, idem_key=row["idem_key"], claim_token=row["claim_token"],
        attempt=row["attempt"], result=row["result"], event_type=row["event_type"],
        event_time=row["event_time"], last_step=row["last_step"], secret_index=row["secret_index"],
        answer=Answer(row["http_status"], dict(row["http_headers"]), row["response"], row["outcome"]),
    )


HTTP_ANSWER_SQL = ("SELECT http_status, http_headers, response FROM webhook_dedup.http_answer("
                   "%s, %s, %s::jsonb, %s::interval, coalesce(%s, 'claim'))")


def http_answer_params(outcome: Union[Outcome, AfterWork], scheme: Optional[str], result: Json,
                       retry_after: Optional[Interval], mode: Optional[Mode]) -> Params:
    return (outcome, scheme, None if result is None else Jsonb(result), retry_after, mode)


def answer_of(row: Mapping[str, Any]) -> Answer:
    return Answer(row["http_status"], dict(row["http_headers"]), row["response"])


def answer_after(delivery: Delivery, result: Json) -> Answer:
    """The answer once the caller's work committed: the claim's status and
    headers (and its outcome, claimed or reclaimed) with `result` (as
    webhook_complete stored it) as the body."""
    return replace(delivery.answer, body=result)


#: The default cap on a body read by from_starlette and from_django: 25 MB,
#: GitHub's limit on a delivery's payload (the Node package's MAX_BODY_BYTES).
MAX_BODY_BYTES = 25 * 1024 * 1024


class BodyTooLarge(Exception):
    """A request body over the limit, refused before the rest of it is read
    (from_starlette, from_django). `status` is 413; `answer` the ready 413
    answer (to_starlette(error.answer), to_django(error.answer))."""

    status = 413

    def __init__(self, limit: int):
        super().__init__(f"request body over {limit} bytes")
        self.limit = limit
        self.answer = Answer(413, {"Content-Type": "application/json"}, {"error": "Payload Too Large"})


class LeaseLost(Exception):
    """Raised by a with_claim job (or by outbox_put, which raises it when
    webhook_outbox_put returns NULL) when the claim token no longer holds the
    key: with_claim rolls the job's transaction back and returns status
    "lease_lost" (the key's new holder does the work); nothing is recorded
    with webhook_fail."""


PUT_SQL = ("SELECT webhook_dedup.webhook_outbox_put(%s, %s, %s, %s, %s, %s::jsonb,"
           " max_length => coalesce(%s::integer, 255), downstream => %s::text,"
           " downstream_idempotent => coalesce(%s::boolean, true)) AS id")


def put_params(claim: ClaimLike, operation: str, target: str, request: Json, max_length: Optional[int],
               downstream: Optional[str], downstream_idempotent: Optional[bool]) -> Params:
    return (claim.source, claim.idem_key, claim.claim_token, operation, target, Jsonb(request), max_length,
            downstream, downstream_idempotent)


def put_result(row: Mapping[str, Any], claim: ClaimLike) -> int:
    """webhook_outbox_put's id, or LeaseLost for its NULL."""
    if row["id"] is None:
        raise LeaseLost(f"the claim token no longer holds {claim.source} {claim.idem_key}: "
                        "webhook_outbox_put wrote nothing")
    intent_id: int = row["id"]
    return intent_id


COMPLETE_SQL = ("SELECT webhook_dedup.webhook_complete(%s, %s, %s, %s::jsonb) AS completed,"
                " %s::jsonb AS result")
FAIL_SQL = "SELECT webhook_dedup.webhook_fail(%s, %s, %s, %s, retryable => %s) AS state"
NEXT_SQL = "SELECT * FROM webhook_dedup.webhook_next(source => %s, lease => %s::interval, batch => %s)"

#: The exact signature of the webhook_receive this package calls (0.2.0 and later).
RECEIVE_SIGNATURE = ("webhook_dedup.webhook_receive(text, bytea, jsonb, text[], text, text, text, text, text,"
                     " interval, boolean, interval, timestamp with time zone, text, text, text, text, text,"
                     " text, interval)")
CHECK_SQL = ("SELECT to_regprocedure(%s) IS NOT NULL AS installed,"
             " coalesce(has_function_privilege(to_regprocedure(%s), 'EXECUTE'), false) AS allowed,"
             " current_database() AS database, current_user AS role")


class NotReady(RuntimeError):
    """The database cannot serve this receiver; the message says what to do."""


def check_row(row: Mapping[str, Any]) -> None:
    if not row["installed"]:
        raise NotReady(f"webhook_dedup is not installed in database {row['database']} (or is too old): "
                       "run CREATE EXTENSION webhook_dedup (or ALTER EXTENSION webhook_dedup UPDATE)")
    if not row["allowed"]:
        raise NotReady(f"role {row['role']} may not call webhook_dedup.webhook_receive in database "
                       f"{row['database']}: GRANT webhook_dedup_receiver TO {row['role']}")


def queued_of(row: Mapping[str, Any]) -> QueuedDelivery:
    return QueuedDelivery(source=row["source"], idem_key=row["idem_key"], claim_token=row["claim_token"],
                          attempt=row["attempt"], last_step=row["last_step"], payload=row["payload"],
                          event_type=row["event_type"], headers=row["headers"])


class WorkerBase:
    """What sync.Worker and aio.Worker share: their settings (source: only
    this source's keys; lease: a PostgreSQL interval, None for the source's;
    batch: keys per webhook_next, 1..1000; idle_s: the pause when nothing
    is due; on_error: called when webhook_next, or the webhook_fail after a
    handler raised, fails) and the statements they run."""

    #: sync: a ConnectionPool, aio: an AsyncConnectionPool (typed there).
    pool: Any
    #: handler(delivery): sync, a function; aio, a coroutine function (typed there).
    handler: Any

    def __init__(self, pool: Any, handler: Any, source: Optional[str] = None, lease: Optional[Interval] = None,
                 batch: int = 10, idle_s: float = 0.5, on_error: Optional[ErrorHook] = None):
        self.pool, self.handler = pool, handler
        self.source, self.lease, self.batch, self.idle_s, self.on_error = source, lease, batch, idle_s, on_error

    def next_params(self) -> Params:
        return (self.source, self.lease, self.batch)

    @staticmethod
    def fail_params(delivery: QueuedDelivery, error: BaseException) -> Params:
        return (delivery.source, delivery.idem_key, delivery.claim_token, error_text(error), True)

    def report(self, error: BaseException) -> None:
        if self.on_error:
            self.on_error(error)


@dataclass(frozen=True)
class Intent:
    """An outbox intent webhook_outbox_next handed out, leased to the
    sender (docs/sql-reference.md): call its downstream with
    `downstream_key` (the same on every attempt) and `request`."""
    id: int
    #: This lease's token: the reports are fenced by it.
    lease_token: UUID
    downstream_key: str
    target: str
    operation: str
    request: Json
    attempt: int
    #: When this lease ends (timezone-aware).
    lease_expires_at: datetime
    source: str
    idem_key: str
    downstream_idempotent: bool


def intent_of(row: Mapping[str, Any]) -> Intent:
    return Intent(id=row["id"], lease_token=row["lease_token"], downstream_key=row["downstream_key"],
                  target=row["target"], operation=row["operation"], request=row["request"],
                  attempt=row["attempt"], lease_expires_at=row["lease_expires_at"], source=row["source"],
                  idem_key=row["idem_key"], downstream_idempotent=row["downstream_idempotent"])


class SendError(Exception):
    """What an OutboxSender's `send` raises when the call did not succeed
    (any exception works; these attributes, read from any exception, choose
    the report):

    - `status`: the downstream's HTTP status. 408, 429 and 5xx: webhook_outbox_fail,
      retried (after `retry_after` when given, else the backoff); any other
      (4xx: the request is wrong and will never succeed): webhook_outbox_fail
      with retryable => false, a dead letter.
    - no status: `sent` says whether the request may have reached the
      downstream. False (a refused connection, a failure before sending):
      webhook_outbox_fail, retried. True or not said (a timeout after
      sending): retried with the same key when the intent's downstream is
      idempotent, else webhook_outbox_unknown (parked for a person).
    - `retry_after` (or `retryAfter`): seconds before the retry (the
      downstream's Retry-After)."""

    def __init__(self, message: str, status: Optional[int] = None, retry_after: Optional[float] = None,
                 sent: Optional[bool] = None):
        super().__init__(message)
        self.status, self.retry_after, self.sent = status, retry_after, sent


NEXT_INTENTS_SQL = ("SELECT * FROM webhook_dedup.webhook_outbox_next(target => %s, lease => %s::interval,"
                    " batch => %s)")
ACK_SQL = "SELECT webhook_dedup.webhook_outbox_ack(%s, %s, %s::jsonb) AS done"
OUTBOX_FAIL_SQL = ("SELECT webhook_dedup.webhook_outbox_fail(%s, %s, %s, retryable => %s, retry_after => %s)"
                   " AS done")
UNKNOWN_SQL = "SELECT webhook_dedup.webhook_outbox_unknown(%s, %s, %s) AS done"


def _retry_after(error: BaseException) -> Optional[timedelta]:
    seconds = getattr(error, "retry_after", None)
    if seconds is None:
        seconds = getattr(error, "retryAfter", None)
    if seconds is None or isinstance(seconds, bool):
        return None
    try:
        return timedelta(seconds=max(0.0, float(seconds)))
    except (TypeError, ValueError):
        return None


def report_of(intent: Intent, error: BaseException) -> Tuple[Report, str, Params]:
    """The report of a failed call, by docs/outbox.md's failure table:
    (what, sql, params), what being "failed" (retried), "dead_lettered"
    (fail with retryable false) or "unknown"."""
    text = error_text(error)
    status = getattr(error, "status", None)
    if isinstance(status, int) and not isinstance(status, bool):
        if status in (408, 429) or status >= 500:  # not read, busy or broken: the key again, later
            return "failed", OUTBOX_FAIL_SQL, (intent.id, intent.lease_token, text, True, _retry_after(error))
        # 4xx (a 409/422 for a reused key too): the request will never succeed
        return "dead_lettered", OUTBOX_FAIL_SQL, (intent.id, intent.lease_token, text, False, None)
    if getattr(error, "sent", None) is False or intent.downstream_idempotent:
        # not sent, or sent to a downstream that performs a repeated key once
        return "failed", OUTBOX_FAIL_SQL, (intent.id, intent.lease_token, text, True, _retry_after(error))
    return "unknown", UNKNOWN_SQL, (intent.id, intent.lease_token, text)


class OutboxSenderBase:
    """What sync.OutboxSender and aio.OutboxSender share: their settings
    (target: the intents' target, None for every target; send: the call;
    lease: a PostgreSQL interval per intent, None for the source's; batch:
    intents per webhook_outbox_next, 1..1000, default 1, see docs/outbox.md
    "One call per lease"; idle_s: the pause when nothing is due; on_error:
    called with the error when webhook_outbox_next or a report fails: the
    sender pauses and goes on, and an intent whose report failed is taken
    again once its lease lapses, with the same key)."""

    #: sync: a ConnectionPool, aio: an AsyncConnectionPool (typed there).
    pool: Any
    #: send(intent): sync, a function; aio, a coroutine function (typed there).
    send: Any

    def __init__(self, pool: Any, target: Optional[str], send: Any, lease: Optional[Interval] = None,
                 batch: int = 1, idle_s: float = 0.5, on_error: Optional[ErrorHook] = None):
        self.pool, self.target, self.send = pool, target, send
        self.lease, self.batch, self.idle_s, self.on_error = lease, batch, idle_s, on_error

    def next_params(self) -> Params:
        return (self.target, self.lease, self.batch)

    def report(self, error: BaseException) -> None:
        if self.on_error:
            self.on_error(error)


def error_text(error: BaseException) -> str:
    return str(error)[:1000] or type(error).__name__


def headers_of(pairs: Iterable[Tuple[str, str]]) -> Dict[str, Union[str, List[str]]]:
    """(name, value) pairs, repeats included, as a HeaderMap: names
    lower-cased, a header sent more than once as the list of its values in
    order (joining them with ", " would change what a provider signed)."""
    grouped: Dict[str, List[str]] = {}
    for name, value in pairs:
        grouped.setdefault(name.lower(), []).append(value)
    return {name: values[0] if len(values) == 1 else values for name, values in grouped.items()}


__all__ = ["Answer", "Delivery", "Claim", "QueuedDelivery", "ClaimOutcome", "NotReady", "HeaderMap", "Json",
           "answer_after", "headers_of", "BodyTooLarge", "MAX_BODY_BYTES", "LeaseLost", "Intent", "SendError",
           "Outcome", "RejectReason", "AfterWork", "Mode", "ClaimStatus", "FailState", "Interval", "ReceiveOptions",
           "SenderOptions", "ClaimLike", "ErrorHook"]
