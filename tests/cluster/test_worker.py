"""The background worker against a real cluster of its own, with the library
preloaded, webhook_dedup.database = 'wd' and a maintenance interval of 1 s
(the worker issue's evidence list): it waits for the extension, sweeps an
expired lease within seconds, deletes keys past retention while a processing
key as old as they are lives on, follows a reload,
bounds each pass by batch_size, and comes back after an error, after
pg_terminate_backend and after pg_ctl stop -m immediate.

Every wait is a bounded poll (own_cluster.wait_for); nothing asserts how
fast something happened beyond "within a few seconds".
"""

import re
import time

import pytest

from edition import native_only
from own_cluster import OwnCluster, set_and_reload, wait_for

pytestmark = native_only("worker")

WORKER = "webhook_dedup maintenance"
RESTART_S = 5  # src/worker.rs RESTART_AFTER
IDLE_RECHECK_S = 10  # src/worker.rs IDLE_RECHECK


@pytest.fixture(scope="module")
def cluster():
    c = OwnCluster({"log_lock_waits": "on"})
    try:
        with c.connect() as conn:
            conn.execute("CREATE DATABASE wd")
            conn.execute("ALTER SYSTEM SET webhook_dedup.database = 'wd'")
            conn.execute("ALTER SYSTEM SET webhook_dedup.maintenance_interval = '1s'")
        c.stop()  # webhook_dedup.database is read at server start
        c.start()
        yield c
    finally:
        c.destroy()


def worker_pid(conn):
    row = conn.execute("SELECT pid FROM pg_stat_activity WHERE backend_type = %s", (WORKER,)).fetchone()
    return row and row[0]


def worker_runs(conn) -> int:
    return conn.execute("SELECT count(*) FROM webhook_dedup.maintenance_runs WHERE application_name = %s",
                        (WORKER,)).fetchone()[0]


def test_the_worker_waits_for_the_extension_then_runs(cluster):
    with cluster.connect("wd") as conn:
        pid = wait_for("the worker in pg_stat_activity", lambda: worker_pid(conn), 15)
        time.sleep(1.5)  # a few intervals with no extension: it waits quietly
        assert worker_pid(conn) == pid, "it neither exited nor restarted"
        conn.execute("CREATE EXTENSION webhook_dedup")
        wait_for("a pass by the worker", lambda: worker_runs(conn) >= 1, IDLE_RECHECK_S + 5)
        assert worker_pid(conn) == pid
        assert conn.execute("SELECT application_name FROM pg_stat_activity WHERE pid = %s",
                            (pid,)).fetchone()[0] == WORKER
    log = cluster.log_text()
    assert 'webhook_dedup maintenance worker started in database "wd" (maintenance_interval 1 s)' in log
    assert not re.search(r"(ERROR|FATAL):", log), log


def test_an_expired_lease_is_swept_within_seconds(cluster):
    with cluster.connect("wd") as conn:
        token = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim('w', 'crashed', lease => '200 milliseconds')"
                             ).fetchone()[0]
        state = lambda: conn.execute(
            "SELECT state, last_error FROM webhook_dedup.keys WHERE source = 'w' AND idem_key = 'crashed'").fetchone()
        assert state()[0] == "processing"
        swept = wait_for("the sweep", lambda: state()[0] == "failed" and state(), 10)
        assert swept[1].startswith("lease of attempt 1 expired at ")
        # the holder that never finished is fenced out; the next claim takes over
        assert conn.execute("SELECT webhook_dedup.webhook_complete('w', 'crashed', %s)", (token,)).fetchone()[0] is False
        assert conn.execute("SELECT outcome, attempt FROM webhook_dedup.webhook_claim('w', 'crashed')").fetchone() == ("reclaimed", 2)


def test_keys_past_retention_go_and_a_processing_key_lives_on(cluster):
    with cluster.connect("wd") as conn:
        conn.execute("""
            INSERT INTO webhook_dedup.keys
                (source, idem_key, state, attempt, claim_token, lease_expires_at, due_at,
                 first_seen_at, last_seen_at, completed_at, expires_at)
            SELECT 'w', 'old' || i, 'completed', 1, NULL::uuid, NULL::timestamptz, NULL::timestamptz,
                   '2020-01-01 12:00+00'::timestamptz, '2020-01-01 12:00+00'::timestamptz,
                   '2020-01-01 12:00+00'::timestamptz, '2020-01-31 12:00+00'::timestamptz
              FROM generate_series(1, 100) i
            UNION ALL
            SELECT 'w', 'working', 'processing', 3, gen_random_uuid(),
                   now() + interval '1 hour', now() + interval '1 hour',
                   '2020-01-01 12:00+00', '2020-01-01 12:00+00', NULL, NULL""")
        token = conn.execute("SELECT claim_token FROM webhook_dedup.keys WHERE idem_key = 'working'").fetchone()[0]
        gone = lambda: conn.execute(
            "SELECT count(*) FROM webhook_dedup.keys WHERE idem_key LIKE 'old%'").fetchone()[0] == 0
        wait_for("the keys past retention to be deleted", gone, 10)
        row = conn.execute("SELECT state, attempt, claim_token FROM webhook_dedup.keys"
                           " WHERE source = 'w' AND idem_key = 'working'").fetchone()
        assert row == ("processing", 3, token), "lease and token unchanged"
        assert conn.execute("SELECT outcome FROM webhook_dedup.webhook_claim('w', 'working')").fetchone()[0] == "in_progress"
        assert conn.execute("SELECT webhook_dedup.webhook_complete('w', 'working', %s)", (token,)).fetchone()[0] is True
        pruned = conn.execute("SELECT sum(keys_pruned) FROM webhook_dedup.maintenance_runs"
                              " WHERE application_name = %s", (WORKER,)).fetchone()[0]
        assert pruned >= 100
    assert re.search(r"webhook_dedup maintenance: .* \d+ keys past retention deleted", cluster.log_text())


def test_a_reload_changes_the_interval(cluster):
    with cluster.connect("wd") as conn:
        try:
            set_and_reload(conn, "webhook_dedup.maintenance_interval", "1h")
            wait_for("the reload", lambda: "configuration reloaded (maintenance_interval 3600 s)"
                     in cluster.log_text(), 10)
            time.sleep(1.5)  # a pass that was running at the reload finishes
            quiet = worker_runs(conn)
            time.sleep(4)
            assert worker_runs(conn) == quiet, "no pass for four seconds at a one-hour interval"
            # the SIGHUP flag is cleared once handled: one reload, one
            # line, however often the worker woke since
            assert cluster.log_text().count("configuration reloaded (maintenance_interval 3600 s)") == 1
            set_and_reload(conn, "webhook_dedup.maintenance_interval", "1s")
            wait_for("passes again every second", lambda: worker_runs(conn) >= quiet + 2, 10)
        finally:
            set_and_reload(conn, "webhook_dedup.maintenance_interval", "1s")


def test_each_pass_is_bounded_by_batch_size(cluster):
    with cluster.connect("wd") as conn:
        try:
            set_and_reload(conn, "webhook_dedup.batch_size", "2")
            wait_for("the reload", lambda: conn.execute(
                "SELECT setting FROM pg_settings WHERE name = 'webhook_dedup.batch_size'").fetchone()[0] == "2", 10)
            time.sleep(1.5)
            since = conn.execute("SELECT max(id) FROM webhook_dedup.maintenance_runs").fetchone()[0]
            conn.execute("SELECT webhook_dedup.webhook_claim('batch', 'k' || i, lease => '1 millisecond')"
                         "  FROM generate_series(1, 5) i")
            wait_for("all five swept", lambda: conn.execute(
                "SELECT count(*) FROM webhook_dedup.keys WHERE source = 'batch' AND state = 'failed'"
            ).fetchone()[0] == 5, 15)
            # the worker commits each step, then records the pass in a
            # transaction of its own (src/worker.rs): the last sweep's keys
            # are visible before its pass's row, so wait for the row too
            def passes():
                return conn.execute(
                    "SELECT leases_expired, more FROM webhook_dedup.maintenance_runs"
                    " WHERE id > %s AND leases_expired > 0 ORDER BY id", (since,)).fetchall()
            wait_for("the sweeping passes recorded", lambda: sum(n for n, _ in passes()) >= 5, 15)
            per_pass = passes()
            assert sum(n for n, _ in per_pass) == 5
            assert max(n for n, _ in per_pass) <= 2, per_pass
            assert per_pass[0][1] is True, "a full batch says more"
        finally:
            set_and_reload(conn, "webhook_dedup.batch_size", None)


def test_the_worker_restarts_after_an_error(cluster):
    with cluster.connect("wd") as conn:
        pid = worker_pid(conn)
        # Every pass now fails at its last statement (recording the run).
        conn.execute("ALTER TABLE webhook_dedup.maintenance_runs"
                     " ADD CONSTRAINT broken CHECK (false) NOT VALID")
        try:
            wait_for("the worker's exit", lambda: re.search(
                rf'background worker "{WORKER}" \(PID {pid}\) exited with exit code 1', cluster.log_text()), 10)
        finally:
            conn.execute("ALTER TABLE webhook_dedup.maintenance_runs DROP CONSTRAINT broken")
        runs = worker_runs(conn)
        new_pid = wait_for("a new worker", lambda: (p := worker_pid(conn)) not in (None, pid) and p, RESTART_S + 10)
        wait_for("passes by the new worker", lambda: worker_runs(conn) > runs, 10)
        assert new_pid != pid


def test_a_terminated_worker_is_started_again(cluster):
    with cluster.connect("wd") as conn:
        pid = wait_for("the worker", lambda: worker_pid(conn), 15)
        assert conn.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,)).fetchone()[0]
        new_pid = wait_for("a new worker", lambda: (p := worker_pid(conn)) not in (None, pid) and p, RESTART_S + 10)
        runs = worker_runs(conn)
        wait_for("passes by the new worker", lambda: worker_runs(conn) > runs, 10)
        assert new_pid != pid
    assert "webhook_dedup maintenance worker stopping" in cluster.log_text()


def test_sigterm_stops_a_pass_in_its_middle(cluster):
    """The worker used to finish a whole pass (five steps of up to
    batch_size rows) before it honoured SIGTERM, delaying a fast shutdown.
    Here a pass is held in its last step (a trigger sleeps 60 s in the
    insert that records it); pg_terminate_backend ends it within seconds
    (FATAL, as any backend), and the worker comes back."""
    with cluster.connect("wd") as conn:
        conn.execute("""CREATE FUNCTION public.slow_record() RETURNS trigger LANGUAGE plpgsql AS $$
                        BEGIN PERFORM pg_catalog.pg_sleep(60); RETURN NEW; END $$""")
        conn.execute("CREATE TRIGGER slow BEFORE INSERT ON webhook_dedup.maintenance_runs"
                     " FOR EACH ROW EXECUTE FUNCTION public.slow_record()")
        try:
            pid = wait_for("the worker asleep in a pass", lambda: conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE backend_type = %s AND wait_event = 'PgSleep'",
                (WORKER,)).fetchone(), 15)[0]
            started = time.monotonic()
            assert conn.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
            wait_for("the worker's exit", lambda: conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0] == 0, 10)
            assert time.monotonic() - started < 10, "not after the pass's 60 s"
        finally:
            conn.execute("DROP TRIGGER slow ON webhook_dedup.maintenance_runs")
            conn.execute("DROP FUNCTION public.slow_record()")
        assert re.search(r'terminating background worker "webhook_dedup maintenance" due to administrator command',
                         cluster.log_text())
        new_pid = wait_for("a new worker", lambda: (p := worker_pid(conn)) not in (None, pid) and p, RESTART_S + 10)
        runs = worker_runs(conn)
        wait_for("passes by the new worker", lambda: worker_runs(conn) > runs, 10)
        assert new_pid != pid


def test_an_immediate_stop_keeps_completed_keys_and_the_worker(cluster):
    with cluster.connect("wd") as conn:
        for i in range(20):
            token = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim('crash', %s)", (f"k{i}",)).fetchone()[0]
            assert conn.execute("SELECT webhook_dedup.webhook_complete('crash', %s, %s)", (f"k{i}", token)).fetchone()[0]
        pid = worker_pid(conn)
    cluster.stop("immediate")
    cluster.start()
    with cluster.connect("wd") as conn:
        new_pid = wait_for("the worker after the restart", lambda: worker_pid(conn), 15)
        assert new_pid != pid
        outcomes = [conn.execute("SELECT outcome FROM webhook_dedup.webhook_claim('crash', %s)", (f"k{i}",)).fetchone()[0]
                    for i in range(20)]
        assert outcomes == ["duplicate"] * 20
        runs = worker_runs(conn)
        wait_for("passes after the restart", lambda: worker_runs(conn) > runs, 10)
