"""What the sync and async APIs share: the SQL, its parameters, and the rows
read into typed values. Nothing here talks to the database."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from psycopg.types.json import Jsonb

#: A JSON value as psycopg returns jsonb.
Json = Any
#: A request's headers as webhook_receive takes them: names (any case) to a
#: value, or to the list of values of a header sent more than once.
HeaderMap = Mapping[str, Union[str, List[str]]]

#: Outcomes a caller must process (it holds the key's lease).
MUST_PROCESS = ("claimed", "reclaimed")


@dataclass(frozen=True)
class Answer:
    """The HTTP answer the database computed: status, headers (names to
    string values, Content-Type among them) and the JSON body."""
    status: int
    headers: Dict[str, str]
    body: Json

    def body_bytes(self) -> bytes:
        """The body as JSON bytes, as every helper here sends it; keys sorted,
        so that a duplicate's body (the stored result read back from jsonb,
        which keeps its own key order) is byte for byte the first answer's."""
        return json.dumps(self.body, sort_keys=True).encode()


@dataclass(frozen=True)
class Delivery:
    """A delivery as webhook_receive answered it (docs/sql-reference.md)."""
    verified: bool
    reject_reason: Optional[str]
    outcome: Optional[str]
    source: str
    scheme: str
    idem_key: Optional[str]
    claim_token: Optional[Any]
    attempt: Optional[int]
    result: Json
    event_type: Optional[str]
    event_time: Optional[Any]
    last_step: Optional[str]
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
    claim_token: Any
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
    status: str
    result: Json = None
    error: Optional[BaseException] = None
    state: Optional[str] = None


# webhook_receive's options by their SQL names, with their types.
OPTIONS: Tuple[Tuple[str, str], ...] = (
    ("secrets", "text[]"), ("source", "text"), ("environment", "text"), ("account", "text"),
    ("operation", "text"), ("mode", "text"), ("lease", "interval"), ("body_key_fallback", "boolean"),
    ("tolerance", "interval"), ("url", "text"), ("signature_header", "text"), ("signature_prefix", "text"),
    ("algorithm", "text"), ("encoding", "text"), ("method", "text"), ("wait", "interval"),
)
_OPTION_TYPES = dict(OPTIONS)


def receive_sql(scheme: str, body: bytes, headers: HeaderMap, options: Mapping[str, Any]) -> Tuple[str, list]:
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
    params: list = [scheme, bytes(body), Jsonb(dict(headers))]
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
        answer=Answer(row["http_status"], dict(row["http_headers"]), row["response"]),
    )


HTTP_ANSWER_SQL = ("SELECT http_status, http_headers, response FROM webhook_dedup.http_answer("
                   "%s, %s, %s::jsonb, %s::interval, coalesce(%s, 'claim'))")


def http_answer_params(outcome: str, scheme: Optional[str], result: Json, retry_after: Optional[str],
                       mode: Optional[str]) -> tuple:
    return (outcome, scheme, None if result is None else Jsonb(result), retry_after, mode)


def answer_of(row: Mapping[str, Any]) -> Answer:
    return Answer(row["http_status"], dict(row["http_headers"]), row["response"])


def answer_after(delivery: Delivery, result: Json) -> Answer:
    """The answer once the caller's work committed: the claim's status and
    headers with `result` (as webhook_complete stored it) as the body."""
    return replace(delivery.answer, body=result)


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

    def __init__(self, pool, handler, source: Optional[str] = None, lease: Optional[str] = None,
                 batch: int = 10, idle_s: float = 0.5, on_error=None):
        self.pool, self.handler = pool, handler
        self.source, self.lease, self.batch, self.idle_s, self.on_error = source, lease, batch, idle_s, on_error

    def next_params(self) -> tuple:
        return (self.source, self.lease, self.batch)

    @staticmethod
    def fail_params(delivery: "QueuedDelivery", error: BaseException) -> tuple:
        return (delivery.source, delivery.idem_key, delivery.claim_token, error_text(error), True)

    def report(self, error: BaseException) -> None:
        if self.on_error:
            self.on_error(error)


def error_text(error: BaseException) -> str:
    return str(error)[:1000] or type(error).__name__


def headers_of(pairs) -> Dict[str, Union[str, List[str]]]:
    """(name, value) pairs, repeats included, as a HeaderMap: names
    lower-cased, a header sent more than once as the list of its values in
    order (joining them with ", " would change what a provider signed)."""
    grouped: Dict[str, List[str]] = {}
    for name, value in pairs:
        grouped.setdefault(name.lower(), []).append(value)
    return {name: values[0] if len(values) == 1 else values for name, values in grouped.items()}


__all__ = ["Answer", "Delivery", "Claim", "QueuedDelivery", "ClaimOutcome", "NotReady", "HeaderMap", "Json",
           "answer_after", "headers_of"]
