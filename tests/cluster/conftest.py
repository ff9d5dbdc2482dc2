"""Fixtures for the multi-connection tests against a real cluster: races
under load, killed backends and a crashed server.

The cluster comes from the libpq environment variables (PGHOST, PGPORT,
PGUSER, PGDATABASE) with webhook_dedup created, as scripts/test.sh sets up;
the crash test also needs WEBHOOK_DEDUP_PGDATA, WEBHOOK_DEDUP_PG_BIN and
WEBHOOK_DEDUP_PG_OS_USER to restart it. Nothing is skipped: a missing
variable fails the test with a message.
"""

import os
import subprocess

import psycopg
import pytest


def _require(names):
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        pytest.fail(f"cluster tests need {', '.join(missing)} (scripts/test.sh sets them)", pytrace=False)


@pytest.fixture(scope="session")
def connect():
    """A function returning a new autocommit connection to the test cluster."""
    _require(("PGHOST", "PGPORT", "PGUSER", "PGDATABASE"))

    def new_connection():
        return psycopg.connect("", autocommit=True)

    with new_connection() as conn:
        if conn.execute("SELECT to_regproc('webhook_dedup.webhook_claim') IS NULL").fetchone()[0]:
            pytest.fail("webhook_dedup is not installed in the test database", pytrace=False)
    return new_connection


class Server:
    """Control of the test cluster's postmaster (run as its OS user)."""

    def __init__(self):
        _require(("WEBHOOK_DEDUP_PGDATA", "WEBHOOK_DEDUP_PG_BIN", "WEBHOOK_DEDUP_PG_OS_USER"))
        self.data = os.environ["WEBHOOK_DEDUP_PGDATA"]
        self.pg_ctl = os.path.join(os.environ["WEBHOOK_DEDUP_PG_BIN"], "pg_ctl")
        self.user = os.environ["WEBHOOK_DEDUP_PG_OS_USER"]

    def _pg_ctl(self, *args):
        subprocess.run(["runuser", "-u", self.user, "--", self.pg_ctl, "-D", self.data, *args],
                       check=True, stdout=subprocess.DEVNULL)

    def crash(self):
        """Stop without a checkpoint or a clean shutdown: as a power cut looks to PostgreSQL."""
        self._pg_ctl("-m", "immediate", "-w", "stop")

    def start(self):
        self._pg_ctl("-w", "-l", os.path.join(os.path.dirname(self.data), "server.log"), "start")


@pytest.fixture(scope="session")
def server():
    return Server()
