"""Constants and database probes shared by the end-to-end tests and their fixtures."""

import sys
from pathlib import Path

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
            " WHERE source = 'github' AND idem_key = webhook_key('github', %s)",
            (delivery_id,),
        ).fetchone()

    def side_effect_attempts(self, delivery_id: str) -> list:
        """The claim attempt recorded by each committed side effect of the delivery."""
        rows = self.conn.execute(
            "SELECT attempt FROM demo.side_effects WHERE delivery_id = %s ORDER BY id",
            (delivery_id,),
        ).fetchall()
        return [attempt for (attempt,) in rows]
