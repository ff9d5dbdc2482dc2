"""Constants and database probes shared by the end-to-end tests and their fixtures."""

import sys
from pathlib import Path

from psycopg import sql

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
