"""Maintenance without a background worker (issue 43, item 4): the SQL
edition's run_maintenance() scheduled with pg_cron, as docs/sql-edition.md
shows it ("Maintenance without a background worker"), on a server that
preloads pg_cron next to pg_tle, as AWS RDS and Supabase do. A lease of a
microsecond that nobody completes is swept by the scheduled pass, with no
call of the test's (within 90 s: Debian's pg_cron 1.4.2 schedules by the
minute). Debian's PostgreSQL 15 has pg_cron
(postgresql-15-cron); the PyPI builds of 16 and 18 have none, and there
the other tests call run_maintenance() themselves (this one is skipped,
saying so). Then the edition is uninstalled as the docs say.
"""

import os
from pathlib import Path

import pytest

from editions import Edition
from own_cluster import wait_for


def pg_cron_installed() -> bool:
    bin_dir = Path(os.environ.get("WEBHOOK_DEDUP_SQL_EDITION_PG_BIN", "/nonexistent"))
    return any((bin_dir.parent / "lib").glob("**/pg_cron.so"))


@pytest.mark.skipif(not pg_cron_installed(), reason="no pg_cron in this PostgreSQL build (the PyPI builds have none)")
def test_pg_cron_runs_the_maintenance_pass_the_docs_schedule():
    # (jobs run in background workers: the test's server takes no TCP connection)
    e = Edition("sql", preload=("pg_cron",),
                settings={"cron.database_name": "'postgres'", "cron.use_background_workers": "on"})
    try:
        with e.connect() as conn:
            conn.execute("CREATE EXTENSION pg_cron")
            # as docs/sql-edition.md schedules it for a pg_cron before 1.5
            # (Debian 12's is 1.4.2: no schedule in seconds), every minute
            conn.execute("SELECT cron.schedule_in_database('webhook_dedup maintenance', '* * * * *',"
                         " 'SELECT webhook_dedup.run_maintenance()', 'postgres')")
            token = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim('cron', 'cron:1',"
                                 " lease => '1 microsecond')").fetchone()[0]
            assert token is not None
            state = lambda: conn.execute(
                "SELECT state, last_error FROM webhook_dedup.keys WHERE idem_key = 'cron:1'").fetchone()
            swept = wait_for("the scheduled pass to sweep the lapsed lease", lambda: state()[0] == "failed" and state(),
                             90, every_s=1,
                             detail=lambda: conn.execute("SELECT status, return_message FROM cron.job_run_details"
                                                         " ORDER BY runid DESC LIMIT 3").fetchall())
            assert "swept by maintenance" in swept[1], swept
            runs = conn.execute("SELECT count(*), bool_or(leases_expired > 0), max(array_length(errors, 1))"
                                " FROM webhook_dedup.maintenance_runs").fetchone()
            assert runs[0] >= 1 and runs[1] and runs[2] is None, runs
            # pg_cron ran it, not anyone else
            assert conn.execute("SELECT count(*) FROM cron.job_run_details WHERE status = 'succeeded'"
                                " AND command LIKE '%run_maintenance%'").fetchone()[0] >= 1
            # uninstalled as docs/sql-edition.md says: the extension, then its
            # pg_tle registration; the roles stay (as with the native edition)
            conn.execute("SELECT cron.unschedule('webhook_dedup maintenance')")
            conn.execute("DROP EXTENSION webhook_dedup")
            conn.execute("SELECT pgtle.uninstall_extension('webhook_dedup')")
            assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'webhook_dedup'").fetchone()[0] == 0
            assert conn.execute("SELECT count(*) FROM pgtle.available_extensions()"
                                " WHERE name = 'webhook_dedup'").fetchone()[0] == 0
            assert conn.execute("SELECT count(*) FROM pg_roles WHERE rolname LIKE 'webhook_dedup_%'").fetchone()[0] == 3
    finally:
        e.destroy()
