"""End-to-end fixtures: a real PostgreSQL with webhook_dedup, and the example receiver.

The cluster comes from the libpq environment variables PGHOST, PGPORT, PGUSER
and PGDATABASE (the project's test script starts a throwaway cluster, creates
the extension and exports them). Nothing is skipped: without them every test
fails with a message saying what is missing.
"""

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from support import LEASE_SECONDS, RECEIVER, SECRET, Db

REQUIRED_ENV = ("PGHOST", "PGPORT", "PGUSER", "PGDATABASE")
STARTUP_TIMEOUT_S = 15


@pytest.fixture(scope="session")
def db_conn():
    missing = [name for name in REQUIRED_ENV if not os.environ.get(name)]
    if missing:
        pytest.fail(f"end-to-end tests need a cluster with webhook_dedup: set {', '.join(missing)} "
                    "(libpq env vars; scripts/ start a throwaway cluster and export them)",
                    pytrace=False)
    try:
        conn = psycopg.connect("", autocommit=True)
    except psycopg.OperationalError as exc:
        pytest.fail(f"cannot connect with the libpq env vars: {exc}", pytrace=False)
    probe = "SELECT to_regprocedure('webhook_dedup.webhook_claim(text, text, bytea, interval, text)')"
    if conn.execute(probe).fetchone()[0] is None:
        pytest.fail(f"webhook_dedup is not installed in database {os.environ['PGDATABASE']}: "
                    "run CREATE EXTENSION webhook_dedup", pytrace=False)
    yield conn
    conn.close()


@pytest.fixture(scope="session")
def db(db_conn) -> Db:
    return Db(db_conn)


@pytest.fixture(scope="session")
def receiver_url(db_conn, tmp_path_factory):
    """The example receiver's webhook URL, on a free loopback port, with fault
    injection and a 1 s lease, logged in as demo_receiver (examples/receiver/roles.sql). Its stderr (access log, errors) goes to a file
    under pytest's basetemp, shown if it fails to start."""
    log = tmp_path_factory.mktemp("receiver") / "receiver.log"
    # it logs in as a role that may only call the receiver functions
    db_conn.execute((RECEIVER.parent / "roles.sql").read_text())
    with open(log, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(RECEIVER), "--host", "127.0.0.1", "--port", "0", "--dsn", "user=demo_receiver",
             "--secret", SECRET, "--lease", f"{LEASE_SECONDS} second", "--fault-injection"],
            stdout=subprocess.PIPE, stderr=stderr,
        )
    try:
        yield _wait_for_listening_line(proc, log) + "/webhooks/github"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def _wait_for_listening_line(proc: subprocess.Popen, log: Path) -> str:
    """Read the receiver's 'listening on http://HOST:PORT' line; fail if it never comes."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            line = proc.stdout.readline().decode().strip()
            if line.startswith("listening on http://"):
                return line.removeprefix("listening on ")
            if not line and proc.poll() is not None:
                break
    proc.kill()
    proc.wait()
    pytest.fail(f"receiver did not start (exit code {proc.returncode}); its log:\n"
                f"{log.read_text()}", pytrace=False)
