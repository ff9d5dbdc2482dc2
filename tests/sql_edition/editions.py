"""The two editions side by side, each in a throwaway cluster of its own:

- native: the server the native edition is built for (WEBHOOK_DEDUP_PG_BIN),
  webhook_dedup preloaded, `CREATE EXTENSION webhook_dedup`;
- sql: a copy of that server without the native edition's files
  (WEBHOOK_DEDUP_SQL_EDITION_PG_BIN, scripts/lib.sh sql_edition_server),
  pg_tle preloaded, the pg_tle artifact run (WEBHOOK_DEDUP_SQL_EDITION_TLE:
  the roles, then pgtle.install_extension), then
  `CREATE EXTENSION webhook_dedup` as on AWS RDS or Supabase.

scripts/test.sh sets the variables; a missing one fails the test.
"""

import functools
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

sys.path.append(str(Path(__file__).resolve().parents[1] / "cluster"))
from own_cluster import OwnCluster  # noqa: E402


def require(names):
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        pytest.fail(f"the SQL edition's tests need {', '.join(missing)} (scripts/test.sh sets them)", pytrace=False)


@functools.cache
def sql_edition_has_pgcrypto() -> bool:
    """Whether the SQL edition's server has pgcrypto to create: Debian's
    PostgreSQL has it, the PyPI builds of 16 and 18 do not."""
    require(("WEBHOOK_DEDUP_SQL_EDITION_PG_BIN",))
    sharedir = subprocess.run([str(Path(os.environ["WEBHOOK_DEDUP_SQL_EDITION_PG_BIN"]) / "pg_config"), "--sharedir"],
                              check=True, capture_output=True, text=True).stdout.strip()
    return (Path(sharedir) / "extension" / "pgcrypto.control").exists()


# The SQL edition's answer to an HMAC-SHA1 where pgcrypto is not created
# (docs/sql-edition.md, "Differences": SHA-1 is pgcrypto's, SHA-256 and
# SHA-512 PostgreSQL's own)
SHA1_WITHOUT_PGCRYPTO = ("error", "0A000", "HMAC-SHA1 needs pgcrypto in the SQL edition",
                         "CREATE EXTENSION pgcrypto (every managed platform has it), or use the native edition.")
SHA1_SKIP = "documented difference: without pgcrypto (none in this PostgreSQL build) HMAC-SHA1 is 0A000"


def alike(native_answer: tuple, sql_answer: tuple) -> bool:
    """Whether two answers of `answer` are the same, but for the one
    documented difference a server without pgcrypto makes: the SQL
    edition's refusal of an HMAC-SHA1 the native edition computed."""
    return native_answer == sql_answer or (sql_answer == SHA1_WITHOUT_PGCRYPTO and not sql_edition_has_pgcrypto())


# Each edition's server logs what could make an answer depend on timing
# rather than on the edition: every autovacuum of a table (its truncation
# of an emptied table takes an ACCESS EXCLUSIVE lock, which a receive at a
# wait of 0 answers in_progress in both editions) and every lock wait
# longer than deadlock_timeout. A difference the sequences find quotes
# those lines (log_since).
DIAGNOSTICS = {"log_autovacuum_min_duration": "0", "log_lock_waits": "on", "log_line_prefix": "'%m [%p] '"}


class Edition(OwnCluster):
    """One edition's cluster, with the extension created in database
    `postgres`."""

    def __init__(self, name: str, preload: tuple[str, ...] = (), settings: dict | None = None):
        """`preload`: more libraries for shared_preload_libraries (the SQL
        edition's server: pg_cron); `settings`: more server settings."""
        self.name = name
        if name == "native":
            require(("WEBHOOK_DEDUP_PG_BIN",))
            # no background maintenance: the SQL edition has none, and a
            # pass sweeping a lapsed lease in the middle of a sequence would
            # be a difference of timing, not of the editions
            super().__init__({"webhook_dedup.maintenance_interval": "0", **DIAGNOSTICS}, prefix="webhook_dedup_native.")
            with self.connect() as conn:
                conn.execute("CREATE EXTENSION webhook_dedup")
            return
        require(("WEBHOOK_DEDUP_SQL_EDITION_PG_BIN", "WEBHOOK_DEDUP_SQL_EDITION_TLE"))
        libraries = ",".join(("pg_tle", *preload))
        super().__init__({"shared_preload_libraries": f"'{libraries}'", **DIAGNOSTICS, **(settings or {})},
                         prefix="webhook_dedup_sql.",
                         bin=Path(os.environ["WEBHOOK_DEDUP_SQL_EDITION_PG_BIN"]))
        with self.connect() as conn:
            conn.execute("CREATE EXTENSION pg_tle")
            if sql_edition_has_pgcrypto():
                conn.execute("CREATE EXTENSION pgcrypto")
        self.psql_file(os.environ["WEBHOOK_DEDUP_SQL_EDITION_TLE"])
        with self.connect() as conn:
            conn.execute("CREATE EXTENSION webhook_dedup")

    def log_size(self) -> int:
        """Where the server log ends now (for log_since)."""
        return self.log.stat().st_size if self.log.exists() else 0

    def log_since(self, offset: int) -> str:
        """The server log's messages about autovacuum and locks written
        after `offset` (each with its detail lines: a vacuum's "pages: N
        removed" says whether it truncated the table), for a difference's
        report ("none" if there are none)."""
        with open(self.log, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
        messages: list[list[str]] = []
        for line in text.splitlines():
            if line.startswith(("\t", " ")) and messages:
                messages[-1].append(line.strip())
            else:
                messages.append([line])
        wanted = ("automatic vacuum", "automatic analyze", "still waiting for", "acquired", "lock timeout",
                  "canceling autovacuum")
        kept = [" / ".join(m) for m in messages if any(w in m[0] for w in wanted)]
        return "\n    ".join(kept[-20:]) or "none"

    def psql_file(self, path: str, dbname: str = "postgres"):
        """Run an SQL file with this server's psql, stopping at the first
        error (which fails the test with psql's output)."""
        done = subprocess.run([str(self.bin / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(self.dir),
                               "-U", "postgres", "-d", dbname, "-f", path], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.fail(f"psql -f {path} on the {self.name} edition failed:\n{done.stderr[-3000:]}", pytrace=False)


def answer(conn: psycopg.Connection, statement: str, args=()) -> tuple:
    """What a statement answers, comparably across editions: ("rows",
    rows) or ("error", SQLSTATE, message, hint). The connection is
    autocommit: an error leaves nothing behind."""
    try:
        return ("rows", conn.execute(statement, args).fetchall())
    except psycopg.Error as e:
        diag = e.diag
        return ("error", diag.sqlstate, diag.message_primary, diag.message_hint)
