"""The README's "Uninstall", run as written: its SQL blocks are read from
README.md and executed, in order, on a server of this test's own with the
extension in two databases, a login granted the three roles, the worker
running, and a view of the DBA's own over the extension's.

What must hold: DROP EXTENSION refuses (2BP01) while the DBA's view depends
on it, then drops schema webhook_dedup whole in each database; after the
preload settings are reset and the server restarted, no process maps the
library and no worker runs; the roles drop, and the DBA's login stays; the
server logged no error but the refusal the test provoked.
"""

import re
from pathlib import Path

import psycopg
import pytest

from edition import native_only
from own_cluster import OwnCluster, wait_for

# (the SQL edition's uninstall: tests/sql_edition/test_maintenance.py)
pytestmark = native_only("library")

ROOT = Path(__file__).resolve().parents[2]


def readme_uninstall_blocks() -> list:
    """The ```sql blocks of the README's "### Uninstall", in order."""
    text = (ROOT / "README.md").read_text()
    m = re.search(r"^### Uninstall\n(.*?)(?=^##)", text, re.M | re.S)
    assert m, "README.md has no '### Uninstall' section"
    blocks = re.findall(r"```sql\n(.*?)```", m.group(1), re.S)
    assert len(blocks) == 3, blocks
    return blocks


def statements(block: str) -> list:
    """The statements of an SQL block (none of them holds a semicolon)."""
    return [s.strip() + ";" for s in block.split(";") if s.strip()]


def maps_library(pid: int) -> bool:
    return "webhook_dedup.so" in Path(f"/proc/{pid}/maps").read_text()


def test_the_readme_uninstall_leaves_nothing_behind():
    drop_extension, reset_settings, drop_roles = readme_uninstall_blocks()
    assert drop_extension.strip() == "DROP EXTENSION webhook_dedup;"
    # the library preloaded with ALTER SYSTEM, as the README's reset assumes
    cluster = OwnCluster({"webhook_dedup.database": "'app'", "webhook_dedup.maintenance_interval": "'1s'",
                          "shared_preload_libraries": "''"})
    try:
        with cluster.connect() as conn:
            conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'webhook_dedup'")
        cluster.stop()
        cluster.start()
        with cluster.connect() as conn:
            conn.execute("CREATE DATABASE app")
            conn.execute("CREATE DATABASE other")
            conn.execute("CREATE ROLE dba_login LOGIN")
        for db in ("app", "other"):
            with cluster.connect(dbname=db) as conn:
                conn.execute("CREATE EXTENSION webhook_dedup")
                conn.execute("SELECT webhook_dedup.webhook_claim('s', 'k1')")
        with cluster.connect() as conn:
            conn.execute("GRANT webhook_dedup_receiver, webhook_dedup_operator, webhook_dedup_reader TO dba_login")
        with cluster.connect(dbname="app") as conn:
            conn.execute("CREATE VIEW my_duplicates AS SELECT * FROM webhook_dedup.key_history")
        wait_for("the worker to run in app",
                 lambda: "webhook_dedup maintenance worker started" in cluster.log_text(), 20)
        log_before = len(cluster.log_text())

        # the DBA's view depends on the extension: refused, nothing dropped
        with cluster.connect(dbname="app") as conn:
            with pytest.raises(psycopg.errors.DependentObjectsStillExist):
                conn.execute(drop_extension)
            assert conn.execute("SELECT count(*) FROM webhook_dedup.keys").fetchone()[0] == 1
            conn.execute("DROP VIEW my_duplicates")
        for db in ("app", "other"):
            with cluster.connect(dbname=db) as conn:
                conn.execute(drop_extension)
                assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'webhook_dedup'"
                                    ).fetchone()[0] == 0
                assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'webhook_dedup'"
                                    ).fetchone()[0] == 0
        with cluster.connect() as conn:
            # one statement at a time, as psql sends a script's
            for statement in statements(reset_settings):
                conn.execute(statement)
        cluster.stop()
        cluster.start()
        with cluster.connect() as conn:
            assert conn.execute("SHOW shared_preload_libraries").fetchone()[0] == ""
            postmaster = int((cluster.data / "postmaster.pid").read_text().split()[0])
            assert not maps_library(postmaster)
            assert conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'webhook_dedup maintenance'"
                                ).fetchone()[0] == 0
            for statement in statements(drop_roles):
                conn.execute(statement)
            roles = {r for (r,) in conn.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE 'webhook_dedup%'"
                                                " OR rolname = 'dba_login'")}
            assert roles == {"dba_login"}
        errors = [line for line in cluster.log_text()[log_before:].splitlines()
                  if re.search(r"\b(ERROR|FATAL|PANIC):", line)]
        assert len(errors) == 1 and "cannot drop extension webhook_dedup" in errors[0], errors
    finally:
        cluster.destroy()
