"""A throwaway PostgreSQL cluster of a test's own, for what the shared test
cluster cannot do: settings only read at server start (the worker's
database), a 1 s maintenance interval, stops with -m immediate.

It listens only on a Unix socket in its own temporary directory, runs as
WEBHOOK_DEDUP_PG_OS_USER with the binaries in WEBHOOK_DEDUP_PG_BIN (both set
by scripts/test.sh), and preloads webhook_dedup. Against the SQL edition
(edition.py) it is a cluster of the SQL edition's server instead, pg_tle
preloaded and the pg_tle artifact registered in template1 and postgres.
"""

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

import edition


def _require(names):
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        pytest.fail(f"cluster tests need {', '.join(missing)} (scripts/test.sh sets them)", pytrace=False)


class OwnCluster:
    """`settings` join (and may replace) the postgresql.conf lines below;
    `prefix` names the temporary directory; `bin`, the binaries' directory,
    replaces WEBHOOK_DEDUP_PG_BIN (the SQL edition's server, a copy of its
    own: tests/sql_edition)."""

    def __init__(self, settings: dict, prefix: str = "webhook_dedup_own.", bin: Path | None = None):
        sql_edition = bin is None and edition.EDITION == "sql"
        if sql_edition:
            bin = edition.sql_edition_bin()
        _require(("WEBHOOK_DEDUP_PG_OS_USER",) if bin else ("WEBHOOK_DEDUP_PG_BIN", "WEBHOOK_DEDUP_PG_OS_USER"))
        self.bin = bin or Path(os.environ["WEBHOOK_DEDUP_PG_BIN"])
        self.user = os.environ["WEBHOOK_DEDUP_PG_OS_USER"]
        self.dir = Path(tempfile.mkdtemp(prefix=prefix))
        shutil.chown(self.dir, self.user)
        self.dir.chmod(0o755)
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self._run("initdb", "-D", str(self.data), "--auth=trust", "--username=postgres",
                  "--encoding=UTF8", "--locale=C.UTF-8")
        conf = {
            "listen_addresses": "''",
            "unix_socket_directories": f"'{self.dir}'",
            "port": "5432",
            "shared_preload_libraries": "'pg_tle'" if sql_edition else "'webhook_dedup'",
            **settings,
        }
        with open(self.data / "postgresql.conf", "a") as f:
            for name, value in conf.items():
                f.write(f"{name} = {value}\n")
        self.start()
        if sql_edition:
            for dbname in ("template1", "postgres"):
                edition.register_sql_edition(self.bin, str(self.dir), dbname)

    def _run(self, program, *args):
        subprocess.run(["runuser", "-u", self.user, "--", str(self.bin / program), *args],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def start(self):
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "start")

    def stop(self, mode="fast"):
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def connect(self, dbname="postgres", autocommit=True) -> psycopg.Connection:
        return psycopg.connect(host=str(self.dir), port=5432, user="postgres", dbname=dbname,
                               autocommit=autocommit)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def destroy(self):
        try:
            self.stop("immediate")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


class Standby(OwnCluster):
    """A streaming hot standby of `primary` (pg_basebackup -R over the
    primary's Unix socket), in a temporary directory of its own, listening
    on a socket there."""

    def __init__(self, primary: OwnCluster, prefix: str = "webhook_dedup_standby."):
        self.bin, self.user = primary.bin, primary.user
        self.dir = Path(tempfile.mkdtemp(prefix=prefix))
        shutil.chown(self.dir, self.user)
        self.dir.chmod(0o755)
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self._run("pg_basebackup", "-h", str(primary.dir), "-p", "5432", "-U", "postgres", "-D", str(self.data),
                  "-R", "-X", "stream", "--checkpoint=fast")
        with open(self.data / "postgresql.conf", "a") as f:
            f.write(f"unix_socket_directories = '{self.dir}'\nhot_standby = on\n")
        self.start()

    def wait_for_replay(self, primary: OwnCluster, timeout_s: float = 30):
        """Until the standby has replayed everything the primary wrote so far."""
        with primary.connect() as conn:
            target = conn.execute("SELECT pg_current_wal_flush_lsn()").fetchone()[0]
        with self.connect() as conn:
            wait_for(f"the standby to replay up to {target}",
                     lambda: conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,)).fetchone()[0],
                     timeout_s)


def wait_for(what: str, probe, timeout_s: float, every_s: float = 0.2, detail=None):
    """Poll `probe()` until it returns something truthy; fail with `what`
    (and `detail()`, when given) after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            more = f": {detail()}" if detail else ""
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}{more}", pytrace=False)
        time.sleep(every_s)


def set_and_reload(conn, setting: str, value):
    """ALTER SYSTEM SET `setting` (or RESET, for None) and reload."""
    if value is None:
        conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.SQL(setting)))
    else:
        conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.SQL(setting), sql.Literal(value)))
    conn.execute("SELECT pg_reload_conf()")
