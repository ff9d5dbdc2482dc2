"""The edition the cluster layer runs against.

WEBHOOK_DEDUP_EDITION is `native` (the default: the compiled library) or
`sql`: scripts/test.sh runs this layer a second time against the SQL
edition (issue 43), on a cluster of the SQL edition's server
(WEBHOOK_DEDUP_SQL_EDITION_PG_BIN: a PostgreSQL without the native library,
with pg_tle) where the release pg_tle artifact (WEBHOOK_DEDUP_SQL_EDITION_TLE)
is registered, and clusters of the tests' own (own_cluster.OwnCluster) are
made the same way.

A test of a capability the SQL edition documents that it does not have
(docs/sql-edition.md, "Differences from the native edition") is marked
`native_only(<difference>)`: against the SQL edition it is skipped with the
difference named (pytest -rs lists them); nothing else is skipped.
"""

import os
import subprocess
from pathlib import Path

import pytest

EDITION = os.environ.get("WEBHOOK_DEDUP_EDITION", "native")
if EDITION not in ("native", "sql"):
    raise RuntimeError(f"WEBHOOK_DEDUP_EDITION={EDITION!r}: native or sql")

# docs/sql-edition.md, "Differences from the native edition": each
# capability of the native edition the SQL edition does not have
DIFFERENCES = {
    "worker": "background worker (its maintenance is webhook_dedup.run_maintenance(), scheduled with pg_cron; the "
              "worker's settings are placeholders there)",
    "library": "library to load (shared_preload_libraries, LOAD, the library's checks of its own loading; its "
               "uninstall is tests/sql_edition's)",
    "settings": "settings checked when set (its webhook_dedup.* settings are placeholders, checked when a call reads "
                "them)",
}


def native_only(difference: str):
    """Skip the test against the SQL edition, naming `difference` (a key of
    DIFFERENCES)."""
    return pytest.mark.skipif(EDITION == "sql", reason=f"a documented difference: the SQL edition has no "
                                                       f"{DIFFERENCES[difference]} (docs/sql-edition.md)")


def sql_edition_bin() -> Path:
    """The SQL edition's server's binaries."""
    value = os.environ.get("WEBHOOK_DEDUP_SQL_EDITION_PG_BIN")
    if not value:
        pytest.fail("the cluster layer against the SQL edition needs WEBHOOK_DEDUP_SQL_EDITION_PG_BIN "
                    "(scripts/test.sh sets it)", pytrace=False)
    return Path(value)


def register_sql_edition(bin_dir: Path, host: str, dbname: str, check: bool = True):
    """pg_tle, pgcrypto where the build has it, and the pg_tle artifact, in
    database `dbname` (template1 too: a database created from it can then
    `CREATE EXTENSION webhook_dedup`), as on AWS RDS or Supabase. A failure
    fails the test, or with check=False is returned (psql's error; None
    when it worked)."""
    artifact = os.environ.get("WEBHOOK_DEDUP_SQL_EDITION_TLE")
    if not artifact:
        pytest.fail("the cluster layer against the SQL edition needs WEBHOOK_DEDUP_SQL_EDITION_TLE "
                    "(scripts/test.sh sets it)", pytrace=False)
    psql = [str(bin_dir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", host, "-U", "postgres", "-d", dbname]
    sharedir = subprocess.run([str(bin_dir / "pg_config"), "--sharedir"], check=True, capture_output=True,
                              text=True).stdout.strip()
    statements = ["CREATE EXTENSION IF NOT EXISTS pg_tle"]
    if (Path(sharedir) / "extension" / "pgcrypto.control").exists():
        statements.append("CREATE EXTENSION IF NOT EXISTS pgcrypto")
    for command in ([*psql, *(a for s in statements for a in ("-c", s))], [*psql, "-f", artifact]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            if not check:
                return done.stderr
            pytest.fail(f"registering the SQL edition in {dbname} failed: {done.stderr[-3000:]}", pytrace=False)
    return None


class MaintenanceSchedule:
    """What pg_cron does for the SQL edition (docs/sql-edition.md,
    "Maintenance"): `run_maintenance()` in database `dbname` of `cluster`
    every `every_s` seconds, from a thread, until stopped; a pass that
    fails, or a server that is down (a crash test), is tried again at the
    next tick, as pg_cron's next run would."""

    def __init__(self, cluster, dbname: str, every_s: float = 1.0):
        import threading

        self._cluster, self._dbname, self._every_s = cluster, dbname, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        import psycopg

        while not self._stop.wait(self._every_s):
            try:
                with self._cluster.connect(self._dbname) as conn:
                    conn.execute("SELECT * FROM webhook_dedup.run_maintenance()")
            except psycopg.Error:
                pass

    def stop(self):
        self._stop.set()
        self._thread.join(30)


def write_waiting_counts(conn):
    """The SQL edition keeps the count of a call that wrote nothing (a
    duplicate answered from its stored row, a refused signature) in the
    session until the session's next call that writes (docs/sql-edition.md,
    "Counting"): a session of a test that counts makes one such call before
    it ends, a claim of a key of a source of its own. Nothing under the
    native edition, whose counts are in shared memory."""
    if EDITION == "sql":
        conn.execute("SELECT webhook_dedup.webhook_claim('waiting-counts', pg_catalog.gen_random_uuid()::pg_catalog.text)")
