"""The payload archive against a real cluster with the maintenance
worker: the worker makes the day partitions ahead on its own; a shorter
payload retention's rows go in paced batches of batch_size, one batch a
pass (counted pass by pass by hand, then by the worker), and an old
partition is dropped whole; a partition drop waits for no receiver (a
claim transaction that archived holds the archive: the pass gives up
after its lock_timeout, the claim commits unharmed, a later pass drops
it); the archive survives a crash with what committed; a key forgotten
while a pass moves its payload into a new day's partition is erased all
the same.

Every wait is a bounded poll (own_cluster.wait_for).
"""

import datetime
import threading

import pytest
from psycopg import sql

from edition import EDITION, MaintenanceSchedule
from own_cluster import OwnCluster, set_and_reload, wait_for

WORKER = "webhook_dedup maintenance"


@pytest.fixture(scope="module")
def cluster():
    c = OwnCluster({})
    schedule = None
    try:
        with c.connect() as conn:
            conn.execute("CREATE DATABASE wd")
            if EDITION == "native":
                conn.execute("ALTER SYSTEM SET webhook_dedup.database = 'wd'")
                conn.execute("ALTER SYSTEM SET webhook_dedup.maintenance_interval = '1s'")
        if EDITION == "native":
            c.stop()  # webhook_dedup.database is read at server start
            c.start()
        with c.connect("wd") as conn:
            conn.execute("CREATE EXTENSION webhook_dedup")
            conn.execute("INSERT INTO webhook_dedup.sources (source, keep_payload, payload_retention)"
                         " VALUES ('long', true, '3 days'), ('short', true, '1 hour')")
        if EDITION == "sql":
            # the SQL edition's passes come from pg_cron, each second here
            schedule = MaintenanceSchedule(c, "wd")
        yield c
    finally:
        if schedule:
            schedule.stop()
        c.destroy()


def day_partitions(conn) -> list:
    return [r[0] for r in conn.execute(
        """SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = 'webhook_dedup.archive'::regclass AND c.relname <> 'archive_default'
            ORDER BY 1""").fetchall()]


def name_of(day: datetime.date) -> str:
    return "archive_" + day.strftime("%Y%m%d")


def utc_today(conn) -> datetime.date:
    return conn.execute("SELECT (now() AT TIME ZONE 'UTC')::date").fetchone()[0]


def test_the_worker_makes_the_days_ahead(cluster):
    with cluster.connect("wd") as conn:
        today = utc_today(conn)
        wanted = [name_of(today + datetime.timedelta(days=d)) for d in range(4)]
        wait_for("the day partitions", lambda: all(n in day_partitions(conn) for n in wanted), 20)
        # a delivery lands in today's partition, not the default one
        conn.execute("SELECT webhook_dedup.webhook_claim('long', 'today', 'x'::bytea)")
        where = conn.execute("SELECT tableoid::regclass::text FROM webhook_dedup.archive WHERE idem_key = 'today'"
                             ).fetchone()[0]
        assert where == f"webhook_dedup.{name_of(today)}"


def test_a_shorter_payload_retention_goes_in_paced_batches(cluster):
    """Passes by hand in a database of its own (the worker runs in wd), so
    that each pass's batch is the one counted: batch_size 2."""
    with cluster.connect() as conn:
        conn.execute("CREATE DATABASE paced")
        if EDITION == "native":
            set_and_reload(conn, "webhook_dedup.batch_size", "2")
        else:
            # a placeholder: ALTER SYSTEM refuses one before PostgreSQL 17
            # (docs/sql-edition.md, "Settings")
            conn.execute("ALTER DATABASE paced SET webhook_dedup.batch_size = 2")
    try:
        with cluster.connect("paced") as conn:  # a new session: batch_size 2
            conn.execute("CREATE EXTENSION webhook_dedup")
            conn.execute("INSERT INTO webhook_dedup.sources (source, keep_payload, payload_retention)"
                         " VALUES ('long', true, '3 days'), ('short', true, '1 hour')")
            conn.execute("SELECT webhook_dedup.run_maintenance()")
            # seven deliveries of 'short' two hours old (distinct times; in
            # yesterday's day when run just after midnight: its partition
            # is made then, and they are moved into it), one of 'long'
            conn.execute("""INSERT INTO webhook_dedup.archive
                            SELECT now() - interval '2 hours' + g * interval '1 ms', 'short', 'old-' || g, NULL, NULL,
                                   false, 'x', NULL
                              FROM generate_series(1, 7) AS g""")
            conn.execute("""INSERT INTO webhook_dedup.archive
                            VALUES (now() - interval '2 hours', 'long', 'kept', NULL, NULL, false, 'x', NULL)""")
            passes = []
            for _ in range(6):
                ran, pruned, more = conn.execute(
                    "SELECT ran, payloads_pruned, more FROM webhook_dedup.run_maintenance()").fetchone()
                assert ran
                passes.append((pruned, more))
            # a batch per pass, each but the last saying there is more
            assert passes == [(2, True), (2, True), (2, True), (1, False), (0, False), (0, False)]
            assert conn.execute("SELECT idem_key FROM webhook_dedup.archive").fetchall() == [("kept",)]
    finally:
        with cluster.connect() as conn:
            if EDITION == "native":
                set_and_reload(conn, "webhook_dedup.batch_size", None)
            conn.execute("DROP DATABASE paced WITH (FORCE)")


def test_the_worker_applies_a_shorter_payload_retention(cluster):
    with cluster.connect("wd") as conn:
        conn.execute("""INSERT INTO webhook_dedup.archive
                        SELECT now() - interval '2 hours' + g * interval '1 ms', 'short', 'w-' || g, NULL, NULL,
                               false, 'x', NULL
                          FROM generate_series(1, 5) AS g""")
        conn.execute("""INSERT INTO webhook_dedup.archive
                        VALUES (now() - interval '2 hours', 'long', 'w-kept', NULL, NULL, false, 'x', NULL)""")
        wait_for("short's old deliveries gone", lambda: conn.execute(
            "SELECT count(*) FROM webhook_dedup.archive WHERE source = 'short' AND idem_key LIKE 'w-%'"
        ).fetchone()[0] == 0, 30)
        assert conn.execute("SELECT count(*) FROM webhook_dedup.archive WHERE idem_key = 'w-kept'").fetchone()[0] == 1


def test_a_drop_waits_for_no_receiver_and_goes_later(cluster):
    with cluster.connect("wd") as conn:
        old_day = utc_today(conn) - datetime.timedelta(days=10)
        old = name_of(old_day)
        with cluster.connect("wd") as receiver:
            # a receiver's transaction that archived a delivery, still open
            receiver.execute("BEGIN")
            receiver.execute("SELECT webhook_dedup.webhook_claim('long', 'held-open', 'x'::bytea)")
            # then an old day's partition, past the longest payload retention
            # (3 days), attached as maintenance attaches one (SHARE UPDATE
            # EXCLUSIVE on the archive: the receiver is not in its way); no
            # pass can drop it before the receiver holds the archive
            conn.execute(sql.SQL("CREATE TABLE webhook_dedup.{} (LIKE webhook_dedup.archive)").format(
                sql.Identifier(old)))
            conn.execute(sql.SQL("ALTER TABLE webhook_dedup.archive ATTACH PARTITION webhook_dedup.{}"
                                 " FOR VALUES FROM ({}) TO ({})").format(
                sql.Identifier(old), sql.Literal(f"{old_day} 00:00+00"),
                sql.Literal(f"{old_day + datetime.timedelta(days=1)} 00:00+00")))
            last = conn.execute("SELECT coalesce(max(id), 0) FROM webhook_dedup.maintenance_runs").fetchone()[0]
            failed = lambda: conn.execute(
                """SELECT count(*) FROM webhook_dedup.maintenance_runs
                    WHERE id > %s AND array_to_string(errors, ' ') LIKE '%%keeping the payload archive%%'""",
                (last,)).fetchone()[0]
            wait_for("a pass that gave up on the drop", lambda: failed() >= 2, 30)
            assert old in day_partitions(conn), "not dropped while the receiver holds the archive"
            # the receiver was never in the way of anything: it goes on
            receiver.execute("SELECT webhook_dedup.webhook_claim('long', 'held-open-2', 'y'::bytea)")
            receiver.execute("COMMIT")
        wait_for("the old partition dropped", lambda: old not in day_partitions(conn), 30)
        assert conn.execute("SELECT count(*) FROM webhook_dedup.archive WHERE idem_key LIKE 'held-open%'"
                            ).fetchone()[0] == 2
        errors = conn.execute(
            """SELECT errors FROM webhook_dedup.maintenance_runs
                WHERE id > %s AND array_to_string(errors, ' ') LIKE '%%keeping the payload archive%%' LIMIT 1""",
            (last,)).fetchone()[0]
        assert "55P03" in " ".join(errors) or "lock timeout" in " ".join(errors), errors


def test_what_committed_survives_a_crash(cluster):
    with cluster.connect("wd") as conn:
        conn.execute("SELECT webhook_dedup.webhook_claim('long', 'before-crash', 'kept bytes'::bytea)")
    cluster.stop(mode="immediate")
    cluster.start()
    with cluster.connect("wd") as conn:
        row = conn.execute("SELECT payload FROM webhook_dedup.archive WHERE idem_key = 'before-crash'").fetchone()
        assert bytes(row[0]) == b"kept bytes"
        if EDITION == "native":
            wait_for("a pass after the crash", lambda: conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = %s", (WORKER,)).fetchone()[0] == 1, 20)
        else:
            last = conn.execute("SELECT coalesce(max(id), 0) FROM webhook_dedup.maintenance_runs").fetchone()[0]
            wait_for("a scheduled pass after the crash", lambda: conn.execute(
                "SELECT count(*) FROM webhook_dedup.maintenance_runs WHERE id > %s", (last,)).fetchone()[0] >= 1, 20)


def test_a_forget_racing_a_partition_move_erases_the_payload(cluster):
    """A key forgotten while a pass moves its archived delivery from the
    default partition into the day's new one: the payload is erased all
    the same. (0.3.0 lost this race: the forget's DELETE, planned before
    the ATTACH, waited for the move and then scanned the emptied default
    partition only, leaving the payload in the new one.)

    In a database of its own, with passes by hand: a delivery of two days
    ago waits in the default partition (the passes make today's and later
    days' partitions ahead, and a past day's only for the rows it finds). A
    session holding SHARE UPDATE EXCLUSIVE on the archive stands in for
    whatever delays the pass; the pass and the forget start behind it, then
    it lets go (within the pass's lock_timeout of 500 ms)."""
    with cluster.connect() as conn:
        conn.execute("CREATE DATABASE moving")
    with cluster.connect("moving") as conn:
        conn.execute("CREATE EXTENSION webhook_dedup")
        conn.execute("INSERT INTO webhook_dedup.sources (source, keep_payload, payload_retention)"
                     " VALUES ('m', true, '3 days')")
        day = utc_today(conn) - datetime.timedelta(days=2)
        at = f"{day} 12:00+00"
        conn.execute("""INSERT INTO webhook_dedup.keys (source, idem_key, state, first_seen_at, last_seen_at)
                        VALUES ('m', 'm:k', 'completed', %s, now())""", (at,))
        conn.execute("INSERT INTO webhook_dedup.archive (received_at, source, idem_key, conflict, payload)"
                     " VALUES (%s, 'm', 'm:k', false, 'personal data')", (at,))
        assert conn.execute("SELECT tableoid::regclass::text FROM webhook_dedup.archive").fetchone()[0] == \
            "webhook_dedup.archive_default"
        with cluster.connect("moving") as holder, cluster.connect("moving") as maint, \
                cluster.connect("moving") as operator:
            holder.execute("BEGIN")
            holder.execute("LOCK TABLE webhook_dedup.archive IN SHARE UPDATE EXCLUSIVE MODE")
            pids = {name: c.execute("SELECT pg_backend_pid()").fetchone()[0]
                    for name, c in (("maint", maint), ("operator", operator))}
            waiting = lambda pid: conn.execute(
                "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0]
            done = {}
            passes = threading.Thread(target=lambda: done.update(
                maint=maint.execute("SELECT errors FROM webhook_dedup.run_maintenance()").fetchone()[0]))
            forget = threading.Thread(target=lambda: done.update(
                forget=operator.execute("SELECT webhook_dedup.webhook_forget('m', 'm:k')").fetchone()[0]))
            passes.start()
            wait_for("the pass to wait for the archive", lambda: waiting(pids["maint"]), 5, every_s=0.005)
            forget.start()
            wait_for("the forget to wait", lambda: waiting(pids["operator"]) or "forget" in done, 5, every_s=0.005)
            holder.execute("COMMIT")
            passes.join(30)
            forget.join(30)
        assert done["forget"] is True, done
        left = conn.execute("SELECT tableoid::regclass::text FROM webhook_dedup.archive WHERE idem_key = 'm:k'").fetchall()
        assert left == [], f"the forgotten key's payload is still archived in {left} (pass errors: {done['maint']})"
        assert conn.execute("SELECT count(*) FROM webhook_dedup.keys WHERE idem_key = 'm:k'").fetchone()[0] == 0
