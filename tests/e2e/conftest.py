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
    # The examples' workers take every due key of every source
    # (webhook_next without a source), so a key an earlier layer left in
    # flight in this database (the cluster layer's 100,000-key backfill,
    # leased and never completed) would be theirs too, without a payload:
    # the suite starts with no key in flight.
    conn.execute("DELETE FROM webhook_dedup.keys WHERE state <> 'completed'")
    yield conn
    conn.close()


@pytest.fixture(scope="session")
def db(db_conn) -> Db:
    return Db(db_conn)


@pytest.fixture(scope="session")
def start_receiver(db_conn, tmp_path_factory):
    """Starts the example receiver (examples/receiver) with fault injection,
    logged in as demo_receiver (examples/receiver/roles.sql), on a free
    loopback port, with a lease and a wait (Postgres intervals; wait None:
    the provider's default); returns its webhook URL. Its stderr (access log,
    errors) goes to a file under pytest's basetemp, shown if it fails to
    start. One process per (lease, wait), stopped at the end of the session."""
    # it logs in as a role that may only call the receiver functions
    db_conn.execute((RECEIVER.parent / "roles.sql").read_text())
    started = {}

    def start(lease: str, wait=None) -> str:
        if (lease, wait) not in started:
            log = tmp_path_factory.mktemp("receiver") / "receiver.log"
            wait_args = [] if wait is None else ["--wait", wait]
            with open(log, "wb") as stderr:
                proc = subprocess.Popen(
                    [sys.executable, str(RECEIVER), "--host", "127.0.0.1", "--port", "0",
                     "--dsn", "user=demo_receiver", "--secret", SECRET, "--lease", lease, *wait_args,
                     "--fault-injection"],
                    stdout=subprocess.PIPE, stderr=stderr,
                    env={k: v for k, v in os.environ.items() if k != "WEBHOOK_WAIT"},
                )
            started[(lease, wait)] = proc, None  # stopped below even if it never starts listening
            started[(lease, wait)] = proc, _wait_for_listening_line(proc, log) + "/webhooks/github"
        return started[(lease, wait)][1]

    yield start
    for proc, _ in started.values():
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


@pytest.fixture(scope="session")
def receiver_url(start_receiver):
    """The example receiver's webhook URL, with a 1 s lease and no wait
    (--wait 0): a copy of a delivery in flight is answered in_progress at
    once, so the tests see it before the lease expires."""
    return start_receiver(f"{LEASE_SECONDS} second", "0")


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
