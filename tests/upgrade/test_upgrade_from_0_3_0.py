"""ALTER EXTENSION webhook_dedup UPDATE from 0.3.0, the version built from
commit 2a017cf (the last before this update's fixes), to the current one,
on a cluster of its own:

1. 0.3.0 is built from that commit and installed, a cluster starts with it
   preloaded, and its API fills a database: keys in every state, sources
   (one with a short retention, one paused, one keeping payloads), an
   archived delivery and a conflict, an outbox intent, a bulk redrive run,
   a redaction, and grants a DBA gave on the views the update replaces;
2. the cluster stops, the current version is installed, the cluster
   starts, and `ALTER EXTENSION webhook_dedup UPDATE` runs;
3. every key and every history row is kept; webhook_dedup.sources.source is
   in collation "C" and maintenance's per-row look-up of a source's
   retention uses its primary key; the grants on the replaced views are
   kept; what the update added works (the record of redactions and its
   purge, the operator's read of a redrive's keys, the paused redrive); and
   the schema is a fresh install's, object for object.

Run by scripts/test.sh in the upgrade layer (see test_upgrade.py for why it
needs a cluster of its own).
"""

import shutil
import tempfile
from pathlib import Path

import psycopg
import pytest

from test_upgrade import OwnCluster, assert_same_schema, install_current, install_old, sharedir

OLD_VERSION = "0.3.0"
OLD_COMMIT = "2a017cf"

KEY_COLUMNS = ("source, idem_key, state, attempt, claim_token, lease_expires_at, next_attempt_at, due_at, "
               "fingerprint, event_type, result::text, last_step, last_error, deliveries, conflicts, first_seen_at, "
               "last_seen_at, completed_at, leased_at, expires_at, redacted_at, redriven_at, redrive_run")

HISTORY = {
    "sources": "SELECT * FROM webhook_dedup.sources ORDER BY source",
    "payloads": "SELECT source, idem_key, payload, headers::text FROM webhook_dedup.payloads ORDER BY 1, 2",
    "archive": "SELECT received_at, source, idem_key, conflict, payload, headers::text FROM webhook_dedup.archive"
               " ORDER BY 1, 2, 3",
    "outbox": "SELECT id, source, idem_key, operation, target, request::text, downstream_key, state, attempt"
              "  FROM webhook_dedup.outbox ORDER BY id",
    "redrives": "SELECT * FROM webhook_dedup.redrives ORDER BY id",
    "redrive_keys": "SELECT * FROM webhook_dedup.redrive_keys ORDER BY run, n",
    "conflicts": "SELECT * FROM webhook_dedup.conflict_log ORDER BY id",
    "counts": "SELECT * FROM webhook_dedup.claim_counts ORDER BY source, bucket, event_type, bucket_width",
    "runs": "SELECT * FROM webhook_dedup.maintenance_runs ORDER BY id",
}


def keys(conn):
    return {(r[0], r[1]): r for r in conn.execute(
        f"SELECT {KEY_COLUMNS} FROM webhook_dedup.keys ORDER BY source, idem_key").fetchall()}


def fill(conn):
    """Keys in every state and history of every kind, through 0.3.0's API."""
    q = conn.execute
    api = "webhook_dedup."
    q("INSERT INTO webhook_dedup.sources (source, retention) VALUES ('internal-jobs', '1 day')")
    q("INSERT INTO webhook_dedup.sources (source, keep_payload) VALUES ('kept', true)")
    q("SELECT * FROM webhook_dedup.run_maintenance()")  # the archive's day partitions
    token = q(f"SELECT claim_token FROM {api}webhook_claim('kept', 'done', 'body'::bytea)").fetchone()[0]
    q(f"SELECT {api}webhook_complete('kept', 'done', %s, '{{\"status\": 200}}')", (token,))
    q(f"SELECT {api}webhook_claim('kept', 'done', 'other body'::bytea)")  # a conflict, archived
    token = q(f"SELECT claim_token FROM {api}webhook_claim('kept', 'poison', 'p'::bytea)").fetchone()[0]
    q(f"SELECT {api}webhook_fail('kept', 'poison', %s, 'bad input', retryable => false)", (token,))
    q(f"SELECT {api}webhook_claim('kept', 'live', lease => '1 hour')")
    token = q(f"SELECT claim_token FROM {api}webhook_claim('kept', 'refund', lease => '1 hour')").fetchone()[0]
    with conn.transaction():
        q(f"SELECT {api}webhook_outbox_put('kept', 'refund', %s, 'refund', 'payments', '{{\"amount\": 5}}')",
          (token,))
        q(f"SELECT {api}webhook_complete('kept', 'refund', %s)", (token,))
    q(f"SELECT {api}webhook_enqueue('kept', 'queued', 'the payload'::bytea, 'order.paid', '{{\"x-id\": \"1\"}}')")
    q(f"SELECT {api}webhook_enqueue('kept', 'erased', 'secret'::bytea)")
    q(f"SELECT * FROM {api}redact('kept', idem_key => 'erased')")
    q(f"SELECT * FROM {api}redrive('kept')")  # the poison dead letter
    q(f"SELECT {api}pause('internal-jobs', 'crm down')")
    q(f"SELECT * FROM {api}webhook_claim('internal-jobs', 'job-1')")
    q("SELECT * FROM webhook_dedup.run_maintenance()")
    q("GRANT SELECT ON webhook_dedup.key_states, webhook_dedup.retention_warnings, webhook_dedup.redrive_runs"
      " TO upgrade_analyst")


@pytest.fixture(scope="module")
def upgraded():
    workdir = Path(tempfile.mkdtemp(prefix="webhook_dedup_upgrade."))
    cluster = None
    try:
        install_old(workdir, OLD_VERSION, OLD_COMMIT)
        cluster = OwnCluster({})
        with cluster.connect() as conn:
            conn.execute("CREATE DATABASE old")
            conn.execute("CREATE ROLE upgrade_analyst NOLOGIN")
        with cluster.connect("old") as conn:
            conn.execute("CREATE EXTENSION webhook_dedup")
            assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'webhook_dedup'"
                                ).fetchone()[0] == OLD_VERSION
            # 0.3.0's defect: the sources in the database's collation
            assert conn.execute("SELECT attcollation FROM pg_attribute WHERE attrelid = 'webhook_dedup.sources'"
                                "::regclass AND attname = 'source'").fetchone()[0] == 100
            fill(conn)
            conn.execute("INSERT INTO webhook_dedup.sources (source) SELECT 's' || g FROM generate_series(1, 2000) g")
            conn.execute("ANALYZE webhook_dedup.sources")
            assert scans_of_sources(conn) == ["Seq Scan"], "0.3.0's plan, the one issue 41 found"
            before = keys(conn)
            history = {name: conn.execute(sql).fetchall() for name, sql in HISTORY.items()}
        cluster.stop()
        install_current()
        cluster.start()
        with cluster.connect("old") as conn:
            conn.execute("ALTER EXTENSION webhook_dedup UPDATE")
        yield cluster, before, history
    finally:
        if cluster:
            cluster.destroy()
        (sharedir() / f"webhook_dedup--{OLD_VERSION}.sql").unlink(missing_ok=True)
        install_current()
        shutil.rmtree(workdir, ignore_errors=True)


def test_every_key_and_every_history_row_is_kept(upgraded):
    cluster, before, history = upgraded
    with cluster.connect("old") as conn:
        assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'webhook_dedup'"
                            ).fetchone()[0] != OLD_VERSION
        assert len(before) == 7 and keys(conn) == before
        for name, sql in HISTORY.items():
            assert history[name], f"{name}: the fill wrote nothing to compare"
            assert conn.execute(sql).fetchall() == history[name], name


LOOK_UP = ("EXPLAIN (FORMAT JSON) SELECT (SELECT s.retention FROM webhook_dedup.sources AS s"
           "  WHERE s.source OPERATOR(pg_catalog.=) x.source) FROM webhook_dedup.watermarks AS x")


def scans_of_sources(conn) -> list:
    """How the look-up of a candidate row's source retention, as
    history_prune.sql and outbox_prune.sql make it,
    reads webhook_dedup.sources: the node types of the plan that scan it."""
    def walk(node):
        yield node
        for child in node.get("Plans", []):
            yield from walk(child)
    plan = conn.execute(LOOK_UP).fetchone()[0][0]["Plan"]
    return sorted(n["Node Type"] for n in walk(plan) if n.get("Relation Name") == "sources")


def test_the_sources_are_in_collation_c_and_maintenance_uses_their_key(upgraded):
    cluster, *_ = upgraded
    with cluster.connect("old") as conn:
        collation = conn.execute("SELECT c.collname FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation"
                                 " WHERE a.attrelid = 'webhook_dedup.sources'::regclass AND a.attname = 'source'"
                                 ).fetchone()[0]
        assert collation == "C"
        # (0.3.0 read every source per row here: the fixture saw a Seq Scan)
        assert scans_of_sources(conn) in (["Index Scan"], ["Index Only Scan"])
        assert conn.execute("SELECT ran, errors FROM webhook_dedup.run_maintenance()").fetchone() == (True, [])


def test_grants_on_replaced_views_are_kept(upgraded):
    cluster, *_ = upgraded
    with cluster.connect("old") as conn:
        for view in ("key_states", "retention_warnings", "redrive_runs"):
            assert conn.execute("SELECT has_table_privilege('upgrade_analyst', %s, 'SELECT')",
                                (f"webhook_dedup.{view}",)).fetchone()[0], view
        # the views answer as before, the source that kept its collation among them
        assert conn.execute("SELECT count(*) FROM webhook_dedup.key_states WHERE source = 'kept'").fetchone()[0] > 0
        assert conn.execute("SELECT paused_at IS NOT NULL FROM webhook_dedup.key_states"
                            " WHERE source = 'internal-jobs'").fetchone()[0]


def test_what_the_update_added_works(upgraded):
    cluster, *_ = upgraded
    with cluster.connect("old") as conn:
        assert conn.execute("SELECT has_table_privilege('webhook_dedup_operator', 'webhook_dedup.redrive_keys',"
                            " 'SELECT')").fetchone()[0]
        assert conn.execute("SELECT has_function_privilege('webhook_dedup_operator',"
                            " 'webhook_dedup.purge_redactions(boolean)', 'EXECUTE')").fetchone()[0]
        assert not conn.execute("SELECT has_function_privilege('public', 'webhook_dedup.purge_redactions(boolean)',"
                                " 'EXECUTE')").fetchone()[0]
        # a redaction made before the update left no record; one made now does, and is purged
        assert conn.execute("SELECT count(*) FROM webhook_dedup.redactions").fetchone()[0] == 0
        assert conn.execute("SELECT deliveries FROM webhook_dedup.redact('kept', idem_key => 'queued')"
                            ).fetchone()[0] == 2
        rewritten = {r for (r,) in conn.execute("SELECT relation FROM webhook_dedup.purge_redactions()").fetchall()}
        assert "webhook_dedup.payloads" in rewritten
        assert conn.execute("SELECT purged_at IS NOT NULL FROM webhook_dedup.redactions").fetchone()[0]
        conn.execute("SELECT webhook_dedup.pause('kept')")
        run = conn.execute("SELECT run FROM webhook_dedup.redrive('kept', ARRAY['dead_lettered'])").fetchone()[0]
        assert conn.execute("SELECT status FROM webhook_dedup.redrive_runs WHERE id = %s", (run,)).fetchone()[0] \
            == "paused"


def test_the_updated_schema_is_a_fresh_install(upgraded):
    cluster, *_ = upgraded
    with cluster.connect() as conn:
        conn.execute("CREATE DATABASE fresh")
    with cluster.connect("fresh") as conn:
        conn.execute("CREATE EXTENSION webhook_dedup")
        conn.execute("GRANT SELECT ON webhook_dedup.key_states, webhook_dedup.retention_warnings,"
                     " webhook_dedup.redrive_runs TO upgrade_analyst")
    assert_same_schema(cluster, "old", "fresh")
