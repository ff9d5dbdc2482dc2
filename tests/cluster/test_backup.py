"""A logical dump keeps the record: `pg_dump -Fc` of a database with keys in
every state, payloads, outbox intents, sources, watermarks, conflicts,
flushed counts, maintenance runs, the payload archive (its day partitions and
its default one) and a bulk redrive, then `pg_restore` into a fresh
database. pg_restore must exit 0 without a single error, every row of every
table must be equal, the identity sequences must continue after the
restored rows, and every key must answer a claim as it did before the dump
(before the fix the tables were extension members whose rows pg_dump
skipped, and a completed key was answered `claimed` after the restore).
"""

import os
import subprocess

import psycopg
import pytest

from own_cluster import OwnCluster

TABLES = ["keys", "payloads", "outbox", "sources", "watermarks", "replay_guards", "conflict_log", "claim_counts",
          "maintenance_runs", "archive", "redrives", "redrive_keys"]


@pytest.fixture(scope="module")
def cluster():
    c = OwnCluster({})
    try:
        with c.connect() as conn:
            conn.execute("CREATE DATABASE origin")
            # an empty database to restore into, as PostgreSQL's docs advise
            # (pg_dump, "Notes": from template0; the SQL edition's template1
            # has pg_tle, which the dump creates again)
            conn.execute("CREATE DATABASE restored TEMPLATE template0")
        with c.connect("origin") as conn:
            conn.execute("CREATE EXTENSION webhook_dedup")
            fill(conn)
        yield c
    finally:
        c.destroy()


# A verification key that must never appear in a dump.
SECRET = "whsec_never-in-a-dump-5f1e0c"


def token(conn, key):
    return conn.execute("SELECT claim_token FROM webhook_dedup.keys WHERE idem_key = %s", (key,)).fetchone()[0]


def fill(conn):
    """Keys in every state, and a row in every other table."""
    conn.execute("INSERT INTO webhook_dedup.sources (source, lease, max_attempts, retention, note, keep_payload)"
                 " VALUES ('b', '2 minutes', 2, '40 days', 'restored too', true)")
    # the payload archive: day partitions made by maintenance (the first
    # deliveries below land in them), and one row in its default partition
    conn.execute("SELECT * FROM webhook_dedup.run_maintenance()")
    conn.execute("INSERT INTO webhook_dedup.archive VALUES (now() - interval '30 days', 'b', 'old', NULL, NULL,"
                 " false, 'x', NULL)")
    conn.execute("SELECT webhook_dedup.webhook_claim('b', 'processing', 'p1'::bytea)")
    # outbox intents: one pending, one delivered (the processing key's)
    for op in ("refund", "email"):
        conn.execute("SELECT webhook_dedup.webhook_outbox_put('b', 'processing', %s, %s, %s, '{\"amount\": 5}')",
                     (token(conn, "processing"), op, f"t-{op}"))
    (intent, lease) = conn.execute("SELECT id, lease_token FROM webhook_dedup.webhook_outbox_next('t-email')").fetchone()
    conn.execute("SELECT webhook_dedup.webhook_outbox_ack(%s, %s, '{\"sent\": true}')", (intent, lease))
    conn.execute("SELECT webhook_dedup.webhook_claim('b', 'completed', 'p2'::bytea)")
    conn.execute("SELECT webhook_dedup.webhook_complete('b', 'completed', %s, '{\"charge\": \"ch_1\"}')", (token(conn, "completed"),))
    conn.execute("SELECT webhook_dedup.webhook_claim('b', 'failed', 'p3'::bytea)")
    conn.execute("SELECT webhook_dedup.webhook_fail('b', 'failed', %s, 'timeout', retry_after => '1 hour')", (token(conn, "failed"),))
    conn.execute("SELECT webhook_dedup.webhook_claim('b', 'unknown', 'p4'::bytea)")
    conn.execute("SELECT webhook_dedup.webhook_mark_unknown('b', 'unknown', %s, 'crashed')", (token(conn, "unknown"),))
    conn.execute("SELECT webhook_dedup.webhook_claim('b', 'dead', 'p5'::bytea)")
    conn.execute("SELECT webhook_dedup.webhook_fail('b', 'dead', %s, 'bad', retryable => false)", (token(conn, "dead"),))
    conn.execute("SELECT webhook_dedup.webhook_enqueue('b', 'pending', 'p6'::bytea, headers => '{\"x\": \"y\"}')")
    conn.execute("SELECT webhook_dedup.webhook_claim('b', 'completed', 'other'::bytea)")  # a conflict
    conn.execute("SELECT webhook_dedup.webhook_advance('b', 'sub_1', '2026-11-30 12:00+00')")
    conn.execute("SELECT webhook_dedup.add_secret('b', %s)", (SECRET,))
    conn.execute("""SELECT * FROM webhook_dedup.webhook_receive('github', '{"zen": 1}'::bytea,
                      webhook_dedup.webhook_sign('github', '{"zen": 1}'::bytea, %s) || '{"X-GitHub-Delivery": "g1"}', source => 'b')""",
                 (SECRET,))
    # a bulk redrive, cancelled before it moved anything
    run = conn.execute("SELECT run FROM webhook_dedup.redrive('b')").fetchone()[0]
    conn.execute("SELECT webhook_dedup.cancel_redrive(%s)", (run,))
    conn.execute("SELECT webhook_dedup.flush_metrics()")
    conn.execute("SELECT * FROM webhook_dedup.run_maintenance()")
    partitions = conn.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = 'webhook_dedup.archive'::regclass"
                              ).fetchone()[0]
    assert partitions >= 5, "today, three days ahead and the default"
    states = {s for (s,) in conn.execute("SELECT state FROM webhook_dedup.keys").fetchall()}
    assert states == {"pending", "processing", "completed", "failed", "unknown_outcome", "dead_lettered"}


def rows(conn, table):
    return conn.execute(f"SELECT * FROM webhook_dedup.{table} ORDER BY 1, 2, 3").fetchall()


def answers(conn):
    """How each key answers a claim now (rolled back), and a duplicate's
    stored result."""
    conn.execute("BEGIN")
    try:
        return conn.execute(
            """SELECT k.idem_key, c.outcome, c.state, c.result, c.attempt
                 FROM webhook_dedup.keys AS k,
                      LATERAL webhook_dedup.webhook_claim(k.source, k.idem_key, NULL) AS c
                ORDER BY 1""").fetchall()
    finally:
        conn.execute("ROLLBACK")


@pytest.fixture(scope="module")
def restored(cluster):
    env = {**os.environ, "PGHOST": str(cluster.dir), "PGPORT": "5432", "PGUSER": "postgres"}
    dump = cluster.dir / "origin.dump"
    subprocess.run([str(cluster.bin / "pg_dump"), "-Fc", "-d", "origin", "-f", str(dump)], env=env, check=True)
    restore = subprocess.run([str(cluster.bin / "pg_restore"), "--exit-on-error", "-d", "restored", str(dump)],
                             env=env, capture_output=True, text=True)
    return restore


def test_a_dump_holds_no_secret(cluster):
    """webhook_dedup.source_secrets is not registered for pg_dump: a plain
    dump of the database holds no stored key (back them up separately:
    docs/operations.md, "Backups")."""
    env = {**os.environ, "PGHOST": str(cluster.dir), "PGPORT": "5432", "PGUSER": "postgres"}
    with cluster.connect("origin") as conn:
        assert conn.execute("SELECT count(*) FROM webhook_dedup.source_secrets").fetchone()[0] == 1
    plain = subprocess.run([str(cluster.bin / "pg_dump"), "-d", "origin"], env=env, check=True,
                           capture_output=True, text=True).stdout
    assert "sub_1" in plain, "the dump holds the other tables' rows"
    assert SECRET not in plain


def test_an_operator_can_opt_in_to_dumping_the_keys(cluster):
    """webhook_dedup.dump_secrets(true) registers the keys for pg_dump (and
    they restore); false takes them out again."""
    env = {**os.environ, "PGHOST": str(cluster.dir), "PGPORT": "5432", "PGUSER": "postgres"}

    def plain_dump():
        return subprocess.run([str(cluster.bin / "pg_dump"), "-d", "origin"], env=env, check=True,
                              capture_output=True, text=True).stdout

    with cluster.connect("origin") as conn:
        assert conn.execute("SELECT webhook_dedup.dump_secrets(true)").fetchone()[0] is True
    try:
        assert SECRET in plain_dump()
        dump = cluster.dir / "with_secrets.dump"
        subprocess.run([str(cluster.bin / "pg_dump"), "-Fc", "-d", "origin", "-f", str(dump)], env=env, check=True)
        with cluster.connect() as conn:
            conn.execute("CREATE DATABASE with_secrets TEMPLATE template0")
        subprocess.run([str(cluster.bin / "pg_restore"), "--exit-on-error", "-d", "with_secrets", str(dump)],
                       env=env, check=True)
        with cluster.connect("with_secrets") as conn:
            assert conn.execute("SELECT secret FROM webhook_dedup.source_secrets").fetchall() == [(SECRET,)]
    finally:
        with cluster.connect("origin") as conn:
            conn.execute("SELECT webhook_dedup.dump_secrets(false)")
    assert SECRET not in plain_dump()


def test_pg_restore_succeeds_without_errors(restored):
    assert restored.returncode == 0, restored.stderr
    assert restored.stderr == ""


@pytest.mark.parametrize("table", TABLES)
def test_every_row_is_restored(cluster, restored, table):
    with cluster.connect("origin") as a, cluster.connect("restored") as b:
        before = rows(a, table)
        assert before, f"{table} was filled"
        assert rows(b, table) == before


def test_every_key_answers_as_before(cluster, restored):
    with cluster.connect("origin") as a, cluster.connect("restored") as b:
        before = answers(a)
        assert dict((k, o) for k, o, *_ in before)["completed"] == "duplicate"
        assert answers(b) == before


def test_identity_sequences_continue(cluster, restored):
    with cluster.connect("restored") as conn:
        (top,) = conn.execute("SELECT max(id) FROM webhook_dedup.conflict_log").fetchone()
        conn.execute("SELECT webhook_dedup.webhook_claim('b', 'completed', 'third'::bytea)")
        (new,) = conn.execute("SELECT max(id) FROM webhook_dedup.conflict_log").fetchone()
        assert new > top
        # and a new outbox intent gets a new id
        (top,) = conn.execute("SELECT max(id) FROM webhook_dedup.outbox").fetchone()
        tok = conn.execute("SELECT claim_token FROM webhook_dedup.keys WHERE idem_key = 'processing'").fetchone()[0]
        new = conn.execute("SELECT webhook_dedup.webhook_outbox_put('b', 'processing', %s, 'ship', 't', '{}')",
                           (tok,)).fetchone()[0]
        assert new > top
        # the restored pending intent is taken with its downstream key
        assert conn.execute("SELECT downstream_key FROM webhook_dedup.webhook_outbox_next('t-refund')").fetchall() \
            == [("refund:b:processing",)]
        (run,) = conn.execute("SELECT max(id) FROM webhook_dedup.maintenance_runs").fetchone()
        conn.execute("SELECT * FROM webhook_dedup.run_maintenance()")
        assert conn.execute("SELECT max(id) FROM webhook_dedup.maintenance_runs").fetchone()[0] > run
