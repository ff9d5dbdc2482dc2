"""The metrics and operational views against a real cluster with the
library preloaded (the counters live in shared memory): a scripted scenario
with known numbers, including duplicates that race in from several
connections while the first delivery is in progress, must show exactly those
numbers in every view, before the counters are flushed (live) and after
(flushed), and a role granted pg_monitor reads every view without any
access to the keys table.

The scenario, all on source `m8` of a database of its own:
- N = 10 first deliveries a1..a10, each completed;
- 4 more first deliveries: `hold` (completed at the end), `exp` (its
  1-second lease expires and maintenance sweeps it), `dead` (fails, not
  retryable: dead-lettered) and `unk` (marked unknown_outcome);
- M = 6 sequential duplicates of a1..a6 (duplicates of completed keys);
- K = 5 duplicates of `hold` from five connections at once, while `hold`
  is processing (duplicates in progress);
- C = 3 conflicts: a7..a9 again with another payload;
- 2 signature rejections through webhook_receive (a missing header, a
  signature that does not match).
"""

import json
import threading
from pathlib import Path

import psycopg
import pytest
import yaml

from edition import write_waiting_counts
from own_cluster import OwnCluster, wait_for

SOURCE = "m8"
N, M, K, C = 10, 6, 5, 3
FIRST = N + 4
DELIVERIES = FIRST + M + K + C
DUPLICATES = M + K


@pytest.fixture(scope="module")
def cluster():
    c = OwnCluster({})
    try:
        with c.connect() as conn:
            conn.execute("CREATE DATABASE metrics")
        with c.connect("metrics") as conn:
            conn.execute("CREATE EXTENSION webhook_dedup")
        yield c
    finally:
        c.destroy()


def claim(conn, key, payload=b"p", lease="1 minute"):
    return conn.execute(
        "SELECT outcome, claim_token FROM webhook_dedup.webhook_claim(%s, %s, %s, lease => %s::interval, event_type => 'e')",
        (SOURCE, key, payload, lease)).fetchone()


def complete(conn, key, token):
    assert conn.execute("SELECT webhook_dedup.webhook_complete(%s, %s, %s, %s::jsonb)",
                        (SOURCE, key, token, json.dumps({"ok": key}))).fetchone()[0]


def one(conn, query, *args):
    return conn.execute(query, args).fetchone()


def run_scenario(cluster):
    with cluster.connect("metrics") as conn:
        for i in range(1, N + 1):
            outcome, token = claim(conn, f"a{i}")
            assert outcome == "claimed"
            complete(conn, f"a{i}", token)
        hold = claim(conn, "hold")[1]
        assert claim(conn, "exp", lease="1 second")[0] == "claimed"
        dead = claim(conn, "dead")[1]
        assert one(conn, "SELECT webhook_dedup.webhook_fail(%s, 'dead', %s, 'boom', retryable => false)", SOURCE, dead) == (
            "dead_lettered",)
        unk = claim(conn, "unk")[1]
        assert one(conn, "SELECT webhook_dedup.webhook_mark_unknown(%s, 'unk', %s, 'timeout talking to the bank')", SOURCE, unk)
        for i in range(1, M + 1):
            assert claim(conn, f"a{i}")[0] == "duplicate"

        # K duplicates of `hold` from K connections at once
        start, outcomes, guard = threading.Barrier(K), [], threading.Lock()

        def duplicate():
            with cluster.connect("metrics") as other:
                start.wait()
                outcome = claim(other, "hold")[0]
                write_waiting_counts(other)
                with guard:
                    outcomes.append(outcome)

        threads = [threading.Thread(target=duplicate) for _ in range(K)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert outcomes == ["in_progress"] * K
        complete(conn, "hold", hold)

        for i in range(N - C, N):
            assert claim(conn, f"a{i}", payload=b"other")[0] == "conflict"
        # signature rejections (GitHub scheme; nothing is written for them)
        for headers in ({"X-GitHub-Delivery": "d1"},
                        {"X-GitHub-Delivery": "d2", "X-Hub-Signature-256": "sha256=" + "00" * 32}):
            verified, reason = one(conn, "SELECT verified, reject_reason FROM webhook_dedup.webhook_receive('github', %s, %s::jsonb,"
                                   " ARRAY['s3cret'], source => %s)", b"{}", json.dumps(headers), SOURCE)
            assert not verified and reason in ("missing_header", "no_matching_signature")
        write_waiting_counts(conn)


def metrics(conn, view="duplicate_metrics"):
    return one(conn, f"""
        SELECT sum(deliveries), sum(first_claims), sum(duplicates), sum(duplicates_of_completed),
               sum(duplicates_in_progress), sum(conflicts), sum(completions), sum(expired_leases),
               sum(dead_letters), sum(marked_unknown), sum(signature_rejections),
               sum(rejected_missing_header), sum(rejected_no_matching_signature)
          FROM webhook_dedup.{view} WHERE source = %s""", SOURCE)


def expected(expired_leases):
    return (DELIVERIES, FIRST, DUPLICATES, M, K, C, N + 1, expired_leases, 1, 1, 2, 1, 1)


def states(conn):
    """key_states of SOURCE, plus its completed keys counted the slow way."""
    rows = conn.execute("SELECT state, keys, expired_leases FROM webhook_dedup.key_states WHERE source = %s"
                        " ORDER BY state", (SOURCE,)).fetchall()
    states = {state: (keys, expired) for state, keys, expired in rows}
    assert "completed" not in states
    states["completed"] = (one(conn, "SELECT count(*) FROM webhook_dedup.keys WHERE source = %s"
                               " AND state = 'completed'", SOURCE)[0], None)
    return states


def test_every_view_shows_the_scenario_live_and_after_a_flush(cluster):
    run_scenario(cluster)
    with cluster.connect("metrics") as conn:
        wait_for("the 1-second lease to expire",
                 lambda: one(conn, "SELECT count(*) FROM webhook_dedup.stuck_claims WHERE source = %s", SOURCE)[0], 10)
        # live: nothing flushed yet
        assert one(conn, "SELECT count(*) FROM webhook_dedup.claim_counts WHERE source = %s", SOURCE) == (0,)
        assert metrics(conn) == expected(0)
        assert metrics(conn, "duplicate_metrics_by_minute") == expected(0)
        ratio = one(conn, "SELECT sum(duplicates)::float8 / sum(deliveries) FROM webhook_dedup.duplicate_metrics"
                    " WHERE source = %s", SOURCE)[0]
        assert ratio == pytest.approx(DUPLICATES / DELIVERIES)
        assert states(conn) == {"completed": (N + 1, None), "dead_lettered": (1, None),
                                "processing": (1, 1), "unknown_outcome": (1, None)}
        stuck = conn.execute("SELECT idem_key, attempt, overdue > '0' FROM webhook_dedup.stuck_claims"
                             " WHERE source = %s", (SOURCE,)).fetchall()
        assert stuck == [("exp", 1, True)]

        ran, expired, flushed = one(conn, "SELECT ran, leases_expired, metrics_flushed"
                                    " FROM webhook_dedup.run_maintenance()")
        assert ran and expired == 1 and flushed > 0
        # flushed: the same numbers, now from webhook_dedup.claim_counts
        assert one(conn, "SELECT count(*) > 0 FROM webhook_dedup.claim_counts WHERE source = %s", SOURCE) == (True,)
        assert one(conn, "SELECT count(*) FROM webhook_dedup.metrics_live() WHERE source = %s", SOURCE) == (0,)
        assert metrics(conn) == expected(1)
        assert metrics(conn, "duplicate_metrics_by_minute") == expected(1)
        assert states(conn) == {"completed": (N + 1, None), "dead_lettered": (1, None),
                                "failed": (1, None), "unknown_outcome": (1, None)}
        assert one(conn, "SELECT count(*) FROM webhook_dedup.stuck_claims WHERE source = %s", SOURCE) == (0,)

        dead = conn.execute("SELECT idem_key, attempts, last_error FROM webhook_dedup.dead_letters"
                            " WHERE source = %s", (SOURCE,)).fetchall()
        assert dead == [("dead", 1, "boom")]
        unknown = conn.execute("SELECT idem_key, last_error FROM webhook_dedup.unknown_outcomes"
                               " WHERE source = %s", (SOURCE,)).fetchall()
        assert unknown == [("unk", "timeout talking to the bank")]
        conflicts = conn.execute("SELECT idem_key, via, state, key_conflicts FROM webhook_dedup.conflicts"
                                 " WHERE source = %s ORDER BY idem_key", (SOURCE,)).fetchall()
        assert conflicts == [(f"a{i}", "claim", "completed", 1) for i in range(N - C, N)]
        history = one(conn, "SELECT source, state, attempts, deliveries, result->>'ok', last_conflict_at"
                      " FROM webhook_dedup.key_history WHERE idem_key = 'a1'")
        # a1's duplicate and hold's K came within duplicate_record_interval
        # of the key's last recorded activity: answered with reads, counted
        # in the per-source counters above, not on the keys
        # (docs/design.md, "Duplicates are reads")
        assert history == (SOURCE, "completed", 1, 1, "a1", None)
        held = one(conn, "SELECT deliveries FROM webhook_dedup.key_history WHERE idem_key = 'hold'")
        assert held == (1,)

        alerts = conn.execute("SELECT source, alert, deliveries, duplicates FROM"
                              " webhook_dedup.duplicate_rate_alerts(0.02, '1 hour')").fetchall()
        assert alerts == [(SOURCE, "ratio_above_threshold", DELIVERIES, DUPLICATES)]
        assert conn.execute("SELECT * FROM webhook_dedup.duplicate_rate_alerts(0.5, '1 hour')").fetchall() == []


def test_pg_monitor_reads_every_view_but_no_payload(cluster):
    with cluster.connect("metrics") as conn:
        conn.execute("CREATE ROLE watcher LOGIN IN ROLE pg_monitor")
    with psycopg.connect(host=str(cluster.dir), port=5432, user="watcher", dbname="metrics",
                         autocommit=True) as conn:
        for view in ("duplicate_metrics", "duplicate_metrics_by_minute", "key_states", "stuck_claims",
                     "dead_letters", "unknown_outcomes", "conflicts", "key_history", "retention_warnings",
                     "maintenance_runs", "lapsed_leases", "queue_backlog"):
            conn.execute(f"SELECT * FROM webhook_dedup.{view} LIMIT 5").fetchall()
        conn.execute("SELECT * FROM webhook_dedup.duplicate_rate_alerts()").fetchall()
        live = one(conn, "SELECT count(*) FROM webhook_dedup.metrics_live()")
        for query in ("SELECT * FROM webhook_dedup.keys LIMIT 1",
                      "SELECT payload FROM webhook_dedup.payloads LIMIT 1",
                      "SELECT * FROM webhook_dedup.conflict_log LIMIT 1",
                      # changing state is for the owner: a flush it could not write would lose the counts
                      "SELECT webhook_dedup.flush_metrics()",
                      "SELECT * FROM webhook_dedup.run_maintenance()"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(query)
        assert one(conn, "SELECT count(*) FROM webhook_dedup.metrics_live()") == live


def scans(plan, found=None):
    """(node type, relation) of every scan in an EXPLAIN (FORMAT JSON) plan."""
    found = [] if found is None else found
    if "Relation Name" in plan:
        found.append((plan["Node Type"], plan["Relation Name"]))
    for child in plan.get("Plans", []):
        scans(child, found)
    return found


VIEW_QUERIES = [
    "SELECT * FROM webhook_dedup.key_states",
    "SELECT * FROM webhook_dedup.stuck_claims",
    "SELECT * FROM webhook_dedup.dead_letters",
    "SELECT * FROM webhook_dedup.unknown_outcomes",
    "SELECT * FROM webhook_dedup.key_history WHERE idem_key = 'big:123457'",
    "SELECT * FROM webhook_dedup.conflicts WHERE seen_at > now() - interval '1 day'",
    "SELECT * FROM webhook_dedup.conflicts WHERE idem_key = 'big:123457'",
    "SELECT * FROM webhook_dedup.duplicate_metrics WHERE bucket > now() - interval '1 day'",
    "SELECT * FROM webhook_dedup.duplicate_metrics_by_minute",
    "SELECT * FROM webhook_dedup.retention_warnings",
    "SELECT * FROM webhook_dedup.duplicate_rate_alerts()",
    "SELECT * FROM webhook_dedup.outbox_backlog",
    "SELECT * FROM webhook_dedup.outbox_dead_letters",
    "SELECT * FROM webhook_dedup.outbox_unknown_outcomes",
]

# And maintenance's outbox statements (src/sql/statements), with the
# values of a pass: they must not read every delivered intent either.
STATEMENTS = Path(__file__).resolve().parents[2] / "src" / "sql" / "statements"
VIEW_QUERIES += [
    (STATEMENTS / "outbox_lapsed.sql").read_text()
    .replace("$1", "now()").replace("$2", "100"),
    (STATEMENTS / "outbox_prune.sql").read_text()
    .replace("$1", "now()").replace("$2", "interval '30 days'").replace("$3", "100").replace("$4", "interval '30 days'"),
]


def test_no_view_scans_a_million_keys_table(cluster):
    """EXPLAIN of every view over 1,000,000 keys (0.3% of them not
    completed), 200,000 conflicts, 200,000 hourly counts and 300,000 outbox
    intents (0.3% of them not delivered): no sequential
    scan of a table that holds rows. The plans are printed (pytest -s shows
    them)."""
    with cluster.connect() as conn:
        conn.execute("CREATE DATABASE million")
    with cluster.connect("million") as conn:
        conn.execute("CREATE EXTENSION webhook_dedup")
        conn.execute("""
            INSERT INTO webhook_dedup.keys (source, idem_key, state, attempt, first_seen_at,
                                            last_seen_at, completed_at, due_at, last_error, expires_at)
            SELECT 'big' || (i % 4), 'big:' || i, s, 1, now(), now(),
                   CASE WHEN s = 'completed' THEN now() END, CASE WHEN s = 'pending' THEN now() END,
                   CASE WHEN s IN ('dead_lettered', 'unknown_outcome') THEN 'e' END,
                   CASE WHEN s = 'completed' THEN now() + interval '30 days' END
              FROM generate_series(1, 1000000) AS i,
                   LATERAL (SELECT CASE i % 1000 WHEN 0 THEN 'dead_lettered' WHEN 1 THEN 'unknown_outcome'
                                                 WHEN 2 THEN 'pending' ELSE 'completed' END AS s) AS st""")
        # and history: 200,000 conflicts over 60 days, 200,000 hourly counts
        conn.execute("""
            INSERT INTO webhook_dedup.conflict_log (source, idem_key, seen_at, stored_fingerprint, fingerprint, via)
            SELECT 'big' || (i % 4), 'big:' || (i * 5), now() - (i % 86400) * interval '1 minute',
                   '\\x00', '\\x01', 'claim'
              FROM generate_series(1, 200000) AS i""")
        conn.execute("""
            INSERT INTO webhook_dedup.claim_counts (bucket, source, deliveries, first_claims)
            SELECT date_trunc('hour', now()) - h * interval '1 hour', 'big' || s, 10, 9
              FROM generate_series(0, 1999) AS h, generate_series(0, 99) AS s""")
        # 300,000 outbox intents, 0.3% of them not delivered (pending, failed,
        # parked at infinity), over four targets
        conn.execute("""
            INSERT INTO webhook_dedup.outbox (source, idem_key, operation, target, request, downstream_key,
                                              downstream_idempotent, key_attempt, state, due_at, created_at,
                                              updated_at, delivered_at, last_error)
            SELECT 'big', 'big:' || i, 'notify', 't' || (i % 4), '{}', 'notify:big:big%3A' || i, true, 1, s,
                   CASE s WHEN 'completed' THEN NULL WHEN 'dead_lettered' THEN 'infinity' ELSE now() END,
                   now(), now(), CASE WHEN s = 'completed' THEN now() END,
                   CASE WHEN s = 'dead_lettered' THEN 'e' END
              FROM generate_series(1, 300000) AS i,
                   LATERAL (SELECT CASE i % 1000 WHEN 0 THEN 'dead_lettered' WHEN 1 THEN 'failed'
                                                 WHEN 2 THEN 'pending' ELSE 'completed' END AS s) AS st""")
        conn.execute("VACUUM ANALYZE webhook_dedup.keys")
        conn.execute("VACUUM ANALYZE webhook_dedup.outbox")
        conn.execute("ANALYZE webhook_dedup.conflict_log")
        conn.execute("ANALYZE webhook_dedup.claim_counts")
        assert one(conn, "SELECT sum(keys) FROM webhook_dedup.key_states WHERE source LIKE 'big%%'") == (3000,)
        assert one(conn, "SELECT sum(undelivered) FROM webhook_dedup.outbox_backlog") == (600,)
        loaded = {"keys", "payloads", "conflict_log", "claim_counts", "outbox"}
        for query in VIEW_QUERIES:
            plan = one(conn, "EXPLAIN (FORMAT JSON) " + query)[0][0]["Plan"]
            text = "\n".join(r[0] for r in conn.execute("EXPLAIN " + query).fetchall())
            print(f"\n-- {query}\n{text}")
            seq = [rel for node, rel in scans(plan) if "Seq Scan" in node and rel in loaded]
            assert not seq, f"{query} scans {seq}:\n{text}"


def test_the_postgres_exporter_queries_run_as_pg_monitor(cluster):
    """contrib/postgres_exporter/webhook_dedup.yaml: every query runs as a
    pg_monitor role and returns exactly the columns its metrics name."""
    path = Path(__file__).resolve().parents[2] / "contrib" / "postgres_exporter" / "webhook_dedup.yaml"
    queries = yaml.safe_load(path.read_text())
    assert set(queries) == {"webhook_dedup_last_hour", "webhook_dedup_open_keys", "webhook_dedup_maintenance",
                            "webhook_dedup_outbox"}
    with cluster.connect("metrics") as conn:
        conn.execute("DO $$ BEGIN CREATE ROLE exporter LOGIN IN ROLE pg_monitor;"
                     " EXCEPTION WHEN duplicate_object THEN NULL; END $$")
        for key in ("x1", "x2", "x3", "x1"):  # three first claims, one duplicate in progress
            conn.execute("SELECT webhook_dedup.webhook_claim('exported', %s)", (key,))
        # two signature rejections, by reason: no signature header, a signature that does not match
        for headers in ({"X-GitHub-Delivery": "d1"},
                        {"X-GitHub-Delivery": "d2", "X-Hub-Signature-256": "sha256=" + "00" * 32}):
            conn.execute("SELECT webhook_dedup.webhook_receive('github', '{}', %s::jsonb, ARRAY['s3cret'], source => 'exported')",
                         (json.dumps(headers),))
        # two outbox intents of x2's holder, one taken by a sender
        token = conn.execute("SELECT claim_token FROM webhook_dedup.keys WHERE source = 'exported' AND idem_key = 'x2'"
                             ).fetchone()[0]
        for op in ("refund", "email"):
            conn.execute("SELECT webhook_dedup.webhook_outbox_put('exported', 'x2', %s, %s, 'exported-t', '{}')",
                         (token, op))
        conn.execute("SELECT * FROM webhook_dedup.webhook_outbox_next('exported-t')")
    with psycopg.connect(host=str(cluster.dir), port=5432, user="exporter", dbname="metrics",
                         autocommit=True) as conn:
        for name, spec in queries.items():
            cur = conn.execute(spec["query"])
            rows = cur.fetchall()
            declared = [next(iter(m)) for m in spec["metrics"]]
            assert [c.name for c in cur.description] == declared, name
            for metric in spec["metrics"]:
                (column, meta), = metric.items()
                assert meta["usage"] in ("LABEL", "GAUGE") and meta["description"], (name, column)
            if name == "webhook_dedup_last_hour":
                exported = dict(zip(declared, {r[0]: r for r in rows}["exported"]))
                assert (exported["deliveries"], exported["first_claims"]) == (4, 3)
                assert exported["duplicates_in_progress"] == 1
                rejected = {c: v for c, v in exported.items() if c.startswith("rejected_")}
                assert exported["signature_rejections"] == 2
                assert rejected == {**{c: 0 for c in rejected}, "rejected_missing_header": 1,
                                    "rejected_no_matching_signature": 1}
                assert len(rejected) == 7, "one column per reason of webhook_verify_detail, and token_reused"
            if name == "webhook_dedup_open_keys":
                assert ("exported", "processing", 3) in [r[:3] for r in rows]
            if name == "webhook_dedup_outbox":
                outbox = dict(zip(declared, {r[0]: r for r in rows}["exported-t"]))
                assert (outbox["undelivered"], outbox["in_flight"], outbox["unknown_outcome"]) == (2, 1, 0)
            if name == "webhook_dedup_last_hour":
                assert exported["intents_written"] == 2
