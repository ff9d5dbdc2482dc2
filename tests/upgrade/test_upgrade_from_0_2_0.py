"""ALTER EXTENSION webhook_dedup UPDATE from 0.2.0, the version built from
commit 4604008 (the last before 0.3.0's outbox), to the current one, on a
cluster of its own:

1. 0.2.0 is built from that commit (git archive) and installed, a cluster
   starts with it preloaded, and its API fills a database: keys in every
   state (completed with a result, leased, checkpointed, with an expired
   lease, failed, dead-lettered, unknown, pending with a payload and
   headers, conflicting), a verified delivery through webhook_receive with
   a stored key (replay guard), per-source settings, watermarks, flushed
   counts, maintenance runs, and a grant on a view the update replaces;
2. the cluster stops, the current version is installed, the cluster
   starts, and `ALTER EXTENSION webhook_dedup UPDATE` runs;
3. every key keeps every column, every history table its rows (and
   columns: new ones are appended), each key answers a delivery as it did,
   a lease granted before the update still completes its key and writes an
   outbox intent that a sender takes and acknowledges, the grant is kept,
   and the updated schema is a fresh install's, object for object.

Run by scripts/test.sh in the upgrade layer (see test_upgrade.py for why it
needs a cluster of its own).
"""

import shutil
import tempfile
from pathlib import Path

import psycopg
import pytest

from test_upgrade import OwnCluster, assert_same_schema, install_current, install_old, sharedir

OLD_VERSION = "0.2.0"
OLD_COMMIT = "4604008"
SECRET = "It's a Secret to Everybody"

KEY_COLUMNS = ("source, idem_key, state, attempt, claim_token, lease_expires_at, next_attempt_at, due_at, "
               "fingerprint, event_type, result::text, last_step, last_error, deliveries, conflicts, first_seen_at, "
               "last_seen_at, completed_at, leased_at, expires_at")

HISTORY = {
    "payloads": "SELECT source, idem_key, payload, headers::text FROM webhook_dedup.payloads ORDER BY 1, 2",
    "sources": "SELECT * FROM webhook_dedup.sources ORDER BY source",
    "secrets": "SELECT * FROM webhook_dedup.source_secrets ORDER BY id",
    "guards": "SELECT * FROM webhook_dedup.replay_guards ORDER BY 1, 2",
    "watermarks": "SELECT * FROM webhook_dedup.watermarks ORDER BY source, entity_id",
    "conflicts": "SELECT * FROM webhook_dedup.conflict_log ORDER BY id",
    "counts": "SELECT * FROM webhook_dedup.claim_counts ORDER BY source, bucket, event_type, bucket_width",
    "runs": "SELECT * FROM webhook_dedup.maintenance_runs ORDER BY id",
}


def keys(conn):
    return {(r[0], r[1]): r for r in conn.execute(
        f"SELECT {KEY_COLUMNS} FROM webhook_dedup.keys ORDER BY source, idem_key").fetchall()}


def fill(conn):
    """Keys in every state through 0.2.0's API, and history around them."""
    q = conn.execute
    api = "webhook_dedup."
    q("INSERT INTO webhook_dedup.sources (source, retention, lease) VALUES ('long', '90 days', '2 minutes')")
    for key in ("done1", "done2"):
        token = q(f"SELECT claim_token FROM {api}webhook_claim('s', %s, 'body'::bytea)", (key,)).fetchone()[0]
        q(f"SELECT {api}webhook_complete('s', %s, %s, '{{\"status\": 200, \"n\": 12345678901234567890}}')", (key, token))
    token = q(f"SELECT claim_token FROM {api}webhook_claim('long', 'kept')").fetchone()[0]
    q(f"SELECT {api}webhook_complete('long', 'kept', %s)", (token,))
    q(f"SELECT {api}webhook_claim('s', 'live', lease => '1 hour', event_type => 'push')")
    token = q(f"SELECT claim_token FROM {api}webhook_claim('s', 'stepped', lease => '1 hour')").fetchone()[0]
    q(f"SELECT {api}webhook_checkpoint('s', 'stepped', %s, 'charged')", (token,))
    q(f"SELECT {api}webhook_claim('s', 'crashed', lease => '1 millisecond')")
    token = q(f"SELECT claim_token FROM {api}webhook_claim('s', 'retry')").fetchone()[0]
    q(f"SELECT {api}webhook_fail('s', 'retry', %s, 'timeout', retry_after => '1 hour')", (token,))
    token = q(f"SELECT claim_token FROM {api}webhook_claim('s', 'poison')").fetchone()[0]
    q(f"SELECT {api}webhook_fail('s', 'poison', %s, 'bad input', retryable => false)", (token,))
    token = q(f"SELECT claim_token FROM {api}webhook_claim('s', 'unsure')").fetchone()[0]
    q(f"SELECT {api}webhook_mark_unknown('s', 'unsure', %s, 'gateway timeout')", (token,))
    q(f"SELECT {api}webhook_enqueue('q', 'queued', 'the payload'::bytea, 'order.paid', '{{\"x-id\": \"1\"}}')")
    q(f"SELECT {api}webhook_claim('s', 'done1', 'other body'::bytea)")
    # a verified GitHub delivery with the source's stored key: a key, a
    # replay guard (github's ids are in a header it does not sign)
    q(f"SELECT {api}add_secret('github', %s)", (SECRET,))
    body = b'{"zen": "Keep it logically awesome.", "hook_id": 1}'
    headers = q(f"SELECT {api}webhook_sign('github', %s, %s)", (body, SECRET)).fetchone()[0]
    headers.update({"x-github-event": "ping", "x-github-delivery": "d-1"})
    outcome = q(f"SELECT outcome FROM {api}webhook_receive('github', %s, %s)",
                (body, psycopg.types.json.Jsonb(headers))).fetchone()[0]
    assert outcome == "claimed", outcome
    q(f"SELECT {api}webhook_advance('s', 'sub_1', '2026-01-01 00:00+00', 'evt_1')")
    q("SELECT * FROM webhook_dedup.run_maintenance()")
    q("SELECT * FROM webhook_dedup.run_maintenance()")
    q("GRANT SELECT ON webhook_dedup.duplicate_metrics TO upgrade_analyst")


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
            conn.execute("CREATE ROLE upgrade_default NOLOGIN")
        with cluster.connect("old") as conn:
            conn.execute("CREATE EXTENSION webhook_dedup")
            assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'webhook_dedup'"
                                ).fetchone()[0] == OLD_VERSION
            fill(conn)
            # the installing role's default privileges: what they give the
            # objects the update creates must be taken back
            for kind, what in (("TABLES", "ALL"), ("SEQUENCES", "ALL"), ("FUNCTIONS", "EXECUTE")):
                conn.execute(f"ALTER DEFAULT PRIVILEGES GRANT {what} ON {kind} TO upgrade_default")
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
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'webhook_dedup'").fetchone()[0]
        assert version != OLD_VERSION
        after = keys(conn)
        assert len(before) == 11 and after == before
        for name, sql in HISTORY.items():
            old = history[name]
            assert old, f"{name}: the fill wrote nothing to compare"
            now = conn.execute(sql).fetchall()[:len(old)]
            # columns are appended (claim_counts, maintenance_runs): the
            # old ones keep their values
            assert [row[:len(old[0])] for row in now] == old, name
        added = conn.execute("SELECT intents_written, intents_delivered FROM webhook_dedup.claim_counts LIMIT 1"
                             ).fetchone()
        assert added == (0, 0)


def test_every_key_answers_as_before(upgraded):
    cluster, *_ = upgraded
    with cluster.connect("old") as conn:
        def claim(source, key, payload=None):
            return conn.execute("SELECT outcome, attempt, result::text, last_step"
                                "  FROM webhook_dedup.webhook_claim(%s, %s, %s)", (source, key, payload)).fetchone()

        assert claim("s", "done1", b"body") == ("duplicate", 1, '{"n": 12345678901234567890, "status": 200}', None)
        assert claim("s", "done1", b"other body")[0] == "conflict"
        assert claim("long", "kept")[0] == "duplicate"
        assert claim("s", "live")[0] == "in_progress"
        assert claim("s", "stepped") == ("in_progress", 1, None, "charged")
        assert claim("s", "crashed")[:2] == ("reclaimed", 2)
        assert claim("s", "retry")[0] == "retry_later"
        assert claim("s", "poison")[0] == "dead_lettered"
        assert claim("s", "unsure")[0] == "unknown_outcome"
        assert claim("github", "github:d-1")[0] == "in_progress"
        taken = conn.execute("SELECT idem_key, attempt, payload, headers->>'x-id', event_type"
                             "  FROM webhook_dedup.webhook_next('q', batch => 5)").fetchall()
        assert taken == [("queued", 1, b"the payload", "1", "order.paid")]
        ran, errors, expired = conn.execute(
            "SELECT ran, errors, intents_expired FROM webhook_dedup.run_maintenance()").fetchone()
        assert ran and errors == [] and expired == 0


def test_a_lease_from_before_the_update_writes_an_intent(upgraded):
    """The outbox works on keys claimed under 0.2.0: the live lease's token
    writes an intent, completes its key, and a sender takes, sends and
    acknowledges the intent."""
    cluster, *_ = upgraded
    with cluster.connect("old") as conn:
        token = conn.execute("SELECT claim_token FROM webhook_dedup.keys WHERE idem_key = 'stepped'").fetchone()[0]
        with conn.transaction():
            intent = conn.execute("SELECT webhook_dedup.webhook_outbox_put('s', 'stepped', %s, 'refund', 'payments',"
                                  " '{\"amount\": 5}')", (token,)).fetchone()[0]
            assert conn.execute("SELECT webhook_dedup.webhook_complete('s', 'stepped', %s)", (token,)).fetchone()[0]
        taken = conn.execute("SELECT id, lease_token, downstream_key FROM webhook_dedup.webhook_outbox_next('payments')"
                             ).fetchall()
        assert [(t[0], t[2]) for t in taken] == [(intent, "refund:s:stepped")]
        assert conn.execute("SELECT webhook_dedup.webhook_outbox_ack(%s, %s)", (intent, taken[0][1])).fetchone()[0]
        assert conn.execute("SELECT state FROM webhook_dedup.outbox WHERE id = %s", (intent,)).fetchone()[0] == "completed"


def test_default_privileges_give_nothing_on_the_new_objects(upgraded):
    cluster, *_ = upgraded
    with cluster.connect("old") as conn:
        def has(sql, *args):
            return conn.execute(f"SELECT {sql}", args).fetchone()[0]

        for rel in ("webhook_dedup.outbox", "webhook_dedup.outbox_backlog", "webhook_dedup.outbox_unknown_outcomes"):
            assert not has("has_table_privilege('upgrade_default', %s, 'SELECT')", rel), rel
        assert not has("has_table_privilege('upgrade_default', 'webhook_dedup.outbox', 'UPDATE')")
        assert not has("has_sequence_privilege('upgrade_default', 'webhook_dedup.outbox_id_seq', 'USAGE')")
        for fn in ("webhook_dedup.webhook_outbox_resolve(bigint, text, jsonb)", "webhook_dedup.run_maintenance()",
                   "webhook_dedup.webhook_outbox_ack(bigint, uuid, jsonb)"):
            assert not has("has_function_privilege('upgrade_default', %s, 'EXECUTE')", fn), fn
        # the documented roles still have theirs
        assert has("has_function_privilege('webhook_dedup_operator', 'webhook_dedup.webhook_outbox_resolve(bigint, text, jsonb)',"
                   " 'EXECUTE')")
        assert has("has_column_privilege('webhook_dedup_operator', 'webhook_dedup.outbox', 'request', 'SELECT')")
        assert not has("has_column_privilege('webhook_dedup_operator', 'webhook_dedup.outbox', 'lease_token', 'SELECT')")


def test_grants_on_replaced_views_are_kept(upgraded):
    cluster, *_ = upgraded
    with cluster.connect("old") as conn:
        assert conn.execute("SELECT has_table_privilege('upgrade_analyst', 'webhook_dedup.duplicate_metrics', 'SELECT')"
                            ).fetchone()[0]
        assert conn.execute("SELECT has_table_privilege('webhook_dedup_reader', 'webhook_dedup.outbox_backlog', 'SELECT')"
                            ).fetchone()[0]


def test_the_updated_schema_is_a_fresh_install(upgraded):
    cluster, *_ = upgraded
    with cluster.connect() as conn:
        conn.execute("CREATE DATABASE fresh")
    with cluster.connect("fresh") as conn:
        conn.execute("CREATE EXTENSION webhook_dedup")
        conn.execute("GRANT SELECT ON webhook_dedup.duplicate_metrics TO upgrade_analyst")
    assert_same_schema(cluster, "old", "fresh")
