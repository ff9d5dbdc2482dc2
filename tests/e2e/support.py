"""Constants and database probes shared by the end-to-end tests and their fixtures."""

import json
import sys
from pathlib import Path
from typing import Optional

from psycopg import sql
from psycopg.rows import namedtuple_row
from psycopg.types.json import Jsonb

REPO = Path(__file__).resolve().parents[2]
RECEIVER = REPO / "examples" / "receiver" / "receiver.py"
FIXTURES = REPO / "tests" / "fixtures" / "github"
# The tests import the examples' functions (replay.post, receiver.process_claimed).
sys.path[:0] = [str(REPO / "examples" / "replay"), str(REPO / "examples" / "receiver")]

SECRET = "e2e-test-secret"
LEASE_SECONDS = 1


class Db:
    """Read-only views of what a delivery left in the database."""

    def __init__(self, conn):
        self.conn = conn

    def key(self, delivery_id: str):
        """(state, attempt) of the delivery's webhook_dedup key, or None if never stored."""
        return self.conn.execute(
            "SELECT state, attempt FROM webhook_dedup.keys"
            " WHERE source = 'github' AND idem_key = webhook_dedup.webhook_key('github', %s)",
            (delivery_id,),
        ).fetchone()

    def last_step(self, delivery_id: str):
        """The last step checkpointed on the delivery's key (None before any checkpoint)."""
        return self.conn.execute(
            "SELECT last_step FROM webhook_dedup.keys"
            " WHERE source = 'github' AND idem_key = webhook_dedup.webhook_key('github', %s)",
            (delivery_id,),
        ).fetchone()[0]

    def notification_attempts(self, delivery_id: str) -> list:
        """The claim attempt recorded by each committed notification of the delivery."""
        return self._attempts("notifications", delivery_id)

    def side_effect_attempts(self, delivery_id: str) -> list:
        """The claim attempt recorded by each committed side effect of the delivery."""
        return self._attempts("side_effects", delivery_id)

    def _attempts(self, table: str, delivery_id: str) -> list:
        """The attempt column of the delivery's rows in demo.<table>, oldest first."""
        query = sql.SQL("SELECT attempt FROM {} WHERE delivery_id = %s ORDER BY id").format(
            sql.Identifier("demo", table))
        rows = self.conn.execute(query, (delivery_id,)).fetchall()
        return [attempt for (attempt,) in rows]


def http_answer(conn, outcome: str, scheme: Optional[str] = "github", result=None,
                retry_after: Optional[int] = None, mode: str = "claim"):
    """webhook_dedup.http_answer's row (http_status, http_headers, response);
    `retry_after` in seconds."""
    return conn.cursor(row_factory=namedtuple_row).execute(
        "SELECT * FROM webhook_dedup.http_answer(%s, %s, %s, make_interval(secs => %s), %s)",
        (outcome, scheme, None if result is None else Jsonb(result), retry_after, mode)).fetchone()


# Headers http_answer may send, for one outcome or another: an answer must
# carry those of its own outcome, and none of the others.
ANSWER_HEADERS = ("Retry-After", "X-Slack-No-Retry", "webhook-delivery")


def assert_database_answer(conn, answer, outcome: str, scheme: str = "github", body=None,
                           retry_after_max: Optional[int] = None, mode: str = "claim") -> None:
    """`answer` (a replay.Answer) is exactly the database's answer to `outcome`:
    webhook_dedup.http_answer's status, every header of its http_headers with
    its value, and its response as the JSON body, or `body` (the receiver's
    own result, for claimed and reclaimed). With `retry_after_max`, the answer
    must carry a Retry-After of 1 to that many seconds (what is left of a
    lease or a backoff), else none."""
    retry_after = None
    if retry_after_max is not None:
        value = answer.headers.get("Retry-After")
        assert value is not None and value.isdigit() and 1 <= int(value) <= retry_after_max, \
            f"Retry-After {value!r}, expected 1 to {retry_after_max} seconds: {answer}"
        retry_after = int(value)
    expected = http_answer(conn, outcome, scheme, retry_after=retry_after, mode=mode)
    assert answer.status == expected.http_status, (answer, expected)
    for name, value in expected.http_headers.items():
        assert answer.headers.get(name) == value, (name, answer.headers.items(), expected)
    for name in ANSWER_HEADERS:
        if name not in expected.http_headers:
            assert answer.headers.get(name) is None, (name, answer.headers.items(), expected)
    refusals = ("rejected", "missing_event_id", "repeated_header", "error")  # answered without an outcome
    assert answer.outcome == (outcome if outcome not in refusals else None), answer
    want = expected.response if body is None else body
    assert want is not None, f"http_answer({outcome}) has no body: pass the receiver's result"
    assert json.loads(answer.body) == want, (answer.body, want)


# How a holder leaves a key that a later delivery finds: SQL run as the
# holder (claim-mode receivers only claim and complete; a worker fails), the
# answer's status and how long its Retry-After may be (test_receiver.py and
# test_examples.py, each for its receivers).
LEFT_BY_THE_HOLDER = {
    # a retryable failure, due again in a minute: 503, Retry-After the backoff left
    "retry_later": ("SELECT webhook_dedup.webhook_fail('github', %s, %s, 'e2e: failed', retry_after => '1 minute')",
                    503, 60),
    # parked for an operator (webhook_resolve): 200, the provider may stop
    "unknown_outcome": ("SELECT webhook_dedup.webhook_mark_unknown('github', %s, %s, 'e2e: timed out')", 200, None),
    "dead_lettered": ("SELECT webhook_dedup.webhook_fail('github', %s, %s, 'e2e: bad', retryable => false)",
                      200, None),
}


# The SQL edition (docs/sql-edition.md) counts without shared memory: the
# count of a duplicate answered from the stored row, which writes nothing,
# waits in the receiver's session until that session's next call that
# writes ("Differences": counts). scripts/test.sh runs this layer against
# both editions; this is the one difference its tests allow, and only where
# they say so.
SQL_EDITION_COUNTS = ("the SQL edition's documented difference: counts of duplicates that wrote nothing wait in "
                      "the receiver's sessions until their next write (docs/sql-edition.md, \"Differences\")")


def is_sql_edition(conn) -> bool:
    """Whether the database runs the SQL edition (its count log exists)."""
    return conn.execute("SELECT pg_catalog.to_regclass('webhook_dedup._count_log') IS NOT NULL").fetchone()[0]
