"""The distributed mode through the coordinator: after
`SELECT webhook_dedup.distribute()` the same SQL as on one node, with every
guarantee kept.

- the layout: the key tables distributed by `source` and co-located, the
  source tables reference tables;
- 32 connections through the coordinator race on 1,000 keys of 8 sources
  (shards on both workers): each claims every key, in its own random order,
  and a winner does its side effect and webhook_complete in one
  transaction; afterwards exactly one side effect per key, every key
  completed once, nothing written into the shell tables of any node;
- a claim holder whose lease expires, the key reclaimed from another
  connection, the stale holder fenced out, on the worker that owns the key.

Needs webhook_dedup.distribute(): without it every test fails, saying so
(nothing is skipped). conftest.py keeps this file out of the layer until
the function exists.
"""

import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from psycopg.types.json import Jsonb

CONNECTIONS = 32
KEYS = 1_000
SOURCES = [f"src-{i}" for i in range(8)]
# The tables distribute() distributes by source (all co-located: a
# source's rows of every table are on one node), and those it makes
# reference tables.
DISTRIBUTED = ["keys", "payloads", "replay_guards", "signature_tokens", "watermarks", "conflict_log", "claim_counts"]
REFERENCE = ["sources", "source_secrets"]


def one(conn, query, params=()):
    return conn.execute(query, params).fetchone()[0]


def is_distributed(conn) -> bool:
    return one(conn, "SELECT EXISTS (SELECT FROM pg_dist_partition"
                     "  WHERE logicalrelid = 'webhook_dedup.keys'::regclass)")


@pytest.fixture(scope="module")
def distributed(citus):
    """The session's cluster, in distributed mode (distribute() is called
    once, as the superuser, on the coordinator)."""
    with citus.connect() as conn:
        if one(conn, "SELECT to_regproc('webhook_dedup.distribute') IS NULL"):
            pytest.fail("webhook_dedup.distribute() does not exist: the installed webhook_dedup"
                        f" ({citus.extension_version(conn)}) has no distributed mode (issue 17)", pytrace=False)
        if not is_distributed(conn):
            conn.execute("SELECT webhook_dedup.distribute()")
        assert is_distributed(conn), "webhook_dedup.distribute() returned, but webhook_dedup.keys is not distributed"
    return citus


def placement_port(conn, table: str, source: str) -> int:
    """The port of the node holding the shard of `table` that `source` hashes to."""
    return one(conn, "SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)"
                     " WHERE p.shardid = get_shard_id_for_distribution_column(%s, %s::text)",
               (f"webhook_dedup.{table}", source))


def shell_sizes(citus) -> dict:
    """On every node, the bytes in the shell tables (not the shards) of the
    distributed tables: a write that bypassed Citus (say a direct heap
    insert into the relation the name resolves to) lands there."""
    sizes = {}
    for node in citus.nodes:
        with node.connect() as conn:
            for table in DISTRIBUTED:
                sizes[(node.name, table)] = one(conn, "SELECT pg_relation_size(%s::regclass)",
                                                (f"webhook_dedup.{table}",))
    return sizes


def test_distribute_distributes_by_source_and_colocates(distributed):
    with distributed.connect() as conn:
        rows = conn.execute(
            "SELECT c.relname, p.partmethod, column_to_column_name(p.logicalrelid, p.partkey), p.colocationid"
            "  FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid"
            " WHERE c.relnamespace = 'webhook_dedup'::regnamespace").fetchall()
        by_table = {name: (method, column, colocation) for name, method, column, colocation in rows}
        for table in DISTRIBUTED:
            assert by_table.get(table, (None,))[:2] == ("h", "source"), (table, by_table.get(table))
        assert len({by_table[t][2] for t in DISTRIBUTED}) == 1, f"not co-located: {by_table}"
        for table in REFERENCE:
            assert by_table.get(table, (None,))[0] == "n", (table, by_table.get(table))
        # the 8 sources of the race below have shards on both workers
        ports = {placement_port(conn, "keys", s) for s in SOURCES}
    assert ports == {w.port for w in distributed.workers}


def test_32_connections_through_the_coordinator_on_1000_keys(distributed):
    """One side effect per key, in the same transaction as the completion,
    in a table co-located with the keys (as a receiver's business data
    would be: Citus co-locates only distribution columns of one type and
    collation, hence COLLATE "C" as webhook_dedup.keys.source has). In a
    transaction block Citus delegates a distributed function only when it
    was registered with force_delegation; either way both writes commit or
    neither does."""
    keys = [(SOURCES[i % len(SOURCES)], f"evt_{i:04d}") for i in range(KEYS)]
    with distributed.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS side_effects")
        conn.execute("CREATE TABLE side_effects (source text COLLATE \"C\" NOT NULL,"
                     " idem_key text COLLATE \"C\" NOT NULL, by_connection integer NOT NULL)")
        # No unique key on purpose (a second side effect of a key must be
        # countable); a replica identity all the same, which the shard move
        # below (logical replication) needs of every table it moves.
        conn.execute("ALTER TABLE side_effects REPLICA IDENTITY FULL")
        conn.execute("SELECT create_distributed_table('side_effects', 'source',"
                     " colocate_with => 'webhook_dedup.keys')")
    barrier = threading.Barrier(CONNECTIONS)

    def worker(seed):
        order = keys[:]
        random.Random(seed).shuffle(order)
        outcomes, completions = Counter(), Counter()
        with distributed.connect() as conn:
            barrier.wait()
            for source, key in order:
                outcome, token = conn.execute(
                    "SELECT outcome, claim_token FROM webhook_dedup.webhook_claim(%s, %s, lease => '5 minutes')",
                    (source, key)).fetchone()
                outcomes[outcome] += 1
                if outcome == "claimed":
                    with conn.transaction():
                        conn.execute("INSERT INTO side_effects VALUES (%s, %s, %s)", (source, key, seed))
                        done = one(conn, "SELECT webhook_dedup.webhook_complete(%s, %s, %s, '{\"ok\": true}')",
                                   (source, key, token))
                        completions[done] += 1
                        if not done:
                            raise psycopg.Rollback()  # a fenced holder undoes its side effect
        return outcomes, completions

    with ThreadPoolExecutor(CONNECTIONS) as pool:
        results = list(pool.map(worker, range(CONNECTIONS)))
    outcomes = sum((o for o, _ in results), Counter())
    completions = sum((c for _, c in results), Counter())

    assert outcomes["claimed"] == KEYS, outcomes
    assert completions == Counter({True: KEYS}), "every winner completes, none twice"
    assert set(outcomes) <= {"claimed", "in_progress", "duplicate"}, outcomes
    assert sum(outcomes.values()) == CONNECTIONS * KEYS
    with distributed.connect() as conn:
        effects = conn.execute("SELECT source, idem_key, count(*) FROM side_effects GROUP BY 1, 2").fetchall()
        assert len(effects) == KEYS and {(s, k) for s, k, _ in effects} == set(keys)
        assert [e for e in effects if e[2] != 1] == [], "one side effect per key"
        rows = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE state = 'completed' AND attempt = 1), sum(deliveries)"
            "  FROM webhook_dedup.keys WHERE source = ANY(%s)", (SOURCES,)).fetchone()
        assert rows[:2] == (KEYS, KEYS)
        # every delivery counted once, in the per-source counters of the
        # node that ran it (the coordinator's view adds every node's); on
        # the keys, the first of each and the duplicates that wrote (a
        # recent duplicate is a read)
        assert one(conn, "SELECT sum(deliveries) FROM webhook_dedup.duplicate_metrics WHERE source = ANY(%s)",
                   (SOURCES,)) == CONNECTIONS * KEYS
        assert KEYS <= rows[2] <= CONNECTIONS * KEYS
        # the keys are on both workers, each source's on the worker of its shard
        per_source = dict(conn.execute("SELECT source, count(*) FROM webhook_dedup.keys"
                                       " WHERE source = ANY(%s) GROUP BY source", (SOURCES,)).fetchall())
        assert per_source == Counter(s for s, _ in keys)
        ports = {placement_port(conn, "keys", s) for s in per_source}
    assert ports == {w.port for w in distributed.workers}
    assert {k: v for k, v in shell_sizes(distributed).items() if v} == {}, "nothing in a shell table"


def test_an_expired_holder_is_fenced_after_a_reclaim_on_another_connection(distributed):
    source, key = "fence-src", "evt_fence"
    lease_s = 2.0  # ample for the second claim below on a loaded machine
    with distributed.connect() as holder, distributed.connect() as other:
        claimed_at = time.monotonic()
        outcome, old_token, attempt = holder.execute(
            "SELECT outcome, claim_token, attempt FROM webhook_dedup.webhook_claim(%s, %s, lease => %s::interval)",
            (source, key, f"{lease_s} seconds")).fetchone()
        assert (outcome, attempt) == ("claimed", 1)
        assert one(other, "SELECT outcome FROM webhook_dedup.webhook_claim(%s, %s)", (source, key)) == "in_progress"
        time.sleep(max(0.0, claimed_at + lease_s + 0.3 - time.monotonic()))
        outcome, new_token, attempt = other.execute(
            "SELECT outcome, claim_token, attempt FROM webhook_dedup.webhook_claim(%s, %s, lease => '5 minutes')",
            (source, key)).fetchone()
        assert (outcome, attempt) == ("reclaimed", 2)
        assert new_token != old_token
        # the stale holder is fenced: nothing changes
        assert one(holder, "SELECT webhook_dedup.webhook_complete(%s, %s, %s, '{\"by\": \"stale\"}')",
                   (source, key, old_token)) is False
        assert holder.execute("SELECT state, claim_token FROM webhook_dedup.keys WHERE source = %s AND idem_key = %s",
                              (source, key)).fetchone() == ("processing", new_token)
        assert one(other, "SELECT webhook_dedup.webhook_complete(%s, %s, %s, '{\"by\": \"new\"}')",
                   (source, key, new_token)) is True
        assert holder.execute("SELECT outcome, result FROM webhook_dedup.webhook_claim(%s, %s)",
                              (source, key)).fetchone() == ("duplicate", {"by": "new"})
        port = placement_port(holder, "keys", source)
        shard = one(holder, "SELECT get_shard_id_for_distribution_column('webhook_dedup.keys', %s::text)", (source,))
    # the key lives in its shard on one worker, and only there
    worker = distributed.worker_at(port)
    with worker.connect() as conn:
        row = conn.execute(f"SELECT state, attempt, claim_token FROM webhook_dedup.keys_{shard}"
                           " WHERE source = %s AND idem_key = %s", (source, key)).fetchone()
    assert row == ("completed", 2, None)
    assert {k: v for k, v in shell_sizes(distributed).items() if v} == {}, "nothing in a shell table"


def test_a_source_setting_changed_on_the_coordinator_reaches_the_worker_that_runs_the_calls(distributed):
    """Each backend caches per-source settings; the cache-invalidating
    triggers run on every node's copy of the reference table, so a call
    delegated to a worker right after the change commits sees it. Here
    max_attempts: 5 (the first failure is retryable), then 2 (the second
    failure dead-letters)."""
    source, key = "cache-src", "evt_cache"
    with distributed.connect() as conn:
        conn.execute("INSERT INTO webhook_dedup.sources (source, max_attempts) VALUES (%s, 5)", (source,))
        token = one(conn, "SELECT claim_token FROM webhook_dedup.webhook_claim(%s, %s)", (source, key))
        # delegated to the worker, whose backend now caches max_attempts = 5
        assert one(conn, "SELECT webhook_dedup.webhook_fail(%s, %s, %s, 'boom', retry_after => '0 seconds')",
                   (source, key, token)) == "failed"
        conn.execute("UPDATE webhook_dedup.sources SET max_attempts = 2 WHERE source = %s", (source,))
        outcome, token = conn.execute("SELECT outcome, claim_token FROM webhook_dedup.webhook_claim(%s, %s)", (source, key)).fetchone()
        assert outcome == "reclaimed"
        assert one(conn, "SELECT webhook_dedup.webhook_fail(%s, %s, %s, 'boom again', retry_after => '0 seconds')",
                   (source, key, token)) == "dead_lettered", "the worker used the new max_attempts"


def test_webhook_next_hands_every_key_to_one_worker_with_and_without_a_source(distributed):
    """The queue on a distributed install: webhook_next without a source
    takes due keys source by source (Citus locks rows of one shard per
    statement), with a source it is routed to that source's shard. Two
    connections drain 8 sources at once, one naming a source, one not:
    every key is handed out exactly once and completed."""
    sources = [f"queue-src-{i}" for i in range(8)]
    keys = {(s, f"job_{i:03d}") for s in sources for i in range(40)}
    with distributed.connect() as conn:
        for source, key in sorted(keys):
            assert one(conn, "SELECT webhook_dedup.webhook_enqueue(%s, %s, %s)", (source, key, b"{}")) == "accepted"
    handed = Counter()
    lock = threading.Lock()

    def drain(source):
        with distributed.connect() as conn:
            idle = 0
            while idle < 3:
                rows = conn.execute("SELECT source, idem_key, claim_token FROM webhook_dedup.webhook_next(%s, '5 minutes', 7)",
                                    (source,)).fetchall()
                idle = 0 if rows else idle + 1
                for s, k, token in rows:
                    with lock:
                        handed[(s, k)] += 1
                    assert one(conn, "SELECT webhook_dedup.webhook_complete(%s, %s, %s)", (s, k, token)) is True

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(drain, [None, sources[3]]))
    assert set(handed) == keys and set(handed.values()) == {1}, "each key handed out exactly once"
    with distributed.connect() as conn:
        assert one(conn, "SELECT count(*) FROM webhook_dedup.keys WHERE source = ANY(%s) AND state = 'completed'",
                   (sources,)) == len(keys)


@pytest.fixture()
def no_background_passes(distributed):
    """The workers' own maintenance passes off (interval 0, on reload) while
    a test runs passes by hand; back on afterwards."""
    distributed.alter_system("SET webhook_dedup.maintenance_interval = 0")
    time.sleep(0.5)  # the reload reaches each worker's background process
    yield distributed
    distributed.alter_system("RESET webhook_dedup.maintenance_interval")


def test_each_nodes_maintenance_sweeps_and_expires_the_sources_of_its_own_shards(no_background_passes):
    """Distributed, each node's maintenance pass does the sources whose
    shards it holds: the coordinator (no shards) changes nothing, each
    worker sweeps the expired leases and deletes the keys past retention of
    its own sources, and together they leave none."""
    cluster = no_background_passes
    sources = [f"maint-src-{i}" for i in range(8)]
    with cluster.connect() as conn:
        for s in sources:
            for i in range(4):
                assert one(conn, "SELECT outcome FROM webhook_dedup.webhook_claim(%s, %s, lease => '1 second')",
                           (s, f"held_{i}")) == "claimed"
            token = one(conn, "SELECT claim_token FROM webhook_dedup.webhook_claim(%s, 'old')", (s,))
            assert one(conn, "SELECT webhook_dedup.webhook_complete(%s, 'old', %s)", (s, token)) is True
        # the completed keys as if stored 40 days ago (retention: 30 days)
        conn.execute("UPDATE webhook_dedup.keys SET last_seen_at = now() - interval '40 days',"
                     " expires_at = now() - interval '10 days' WHERE source = ANY(%s) AND idem_key = 'old'",
                     (sources,))
        per_port = Counter(placement_port(conn, "keys", s) for s in sources)
    time.sleep(1.5)  # the leases expire

    def states(conn):
        return Counter(conn.execute("SELECT state FROM webhook_dedup.keys WHERE source = ANY(%s)",
                                    (sources,)).fetchall())

    with cluster.coordinator.connect() as conn:
        before = states(conn)
        swept, pruned = conn.execute(
            "SELECT leases_expired, keys_pruned FROM webhook_dedup.run_maintenance()").fetchone()
        assert (swept, pruned) == (0, 0), "the coordinator holds no shard of these sources"
        assert states(conn) == before == Counter({("processing",): 32, ("completed",): 8})
    for worker in cluster.workers:
        with worker.connect() as conn:
            swept, pruned = conn.execute(
                "SELECT leases_expired, keys_pruned FROM webhook_dedup.run_maintenance()").fetchone()
        assert (swept, pruned) == (4 * per_port[worker.port], per_port[worker.port]), worker
    with cluster.connect() as conn:
        assert states(conn) == Counter({("failed",): 32})


def test_each_nodes_maintenance_prunes_the_history_of_its_own_sources(no_background_passes):
    """History past retention (a watermark, a conflict, an hour of counts, a
    replay guard whose key is gone) goes source by source on the node that
    holds the source, like the keys; the retention check is the cluster's,
    made once, on the coordinator. No step of any node's pass fails."""
    cluster = no_background_passes
    sources = [f"hist-src-{i}" for i in range(8)]
    old = "now() - interval '40 days'"
    with cluster.connect() as conn:
        for s in sources:
            assert one(conn, "SELECT webhook_dedup.webhook_advance(%s, 'old', now())", (s,)) is True
            assert one(conn, "SELECT webhook_dedup.webhook_advance(%s, 'young', now())", (s,)) is True
            assert one(conn, "SELECT outcome FROM webhook_dedup.webhook_claim(%s, 'k', 'a'::bytea)", (s,)) == "claimed"
            assert one(conn, "SELECT outcome FROM webhook_dedup.webhook_claim(%s, 'k', 'b'::bytea)", (s,)) == "conflict"
            conn.execute("INSERT INTO webhook_dedup.claim_counts (bucket, source) VALUES"
                         f" (date_trunc('hour', {old}), %s)", (s,))
            conn.execute("INSERT INTO webhook_dedup.replay_guards (source, body_sha256, idem_key, seen_at)"
                         f" VALUES (%s, sha256(%s::bytea), 'gone', {old})", (s, s))
        conn.execute(f"UPDATE webhook_dedup.watermarks SET updated_at = {old}"
                     " WHERE source = ANY(%s) AND entity_id = 'old'", (sources,))
        conn.execute(f"UPDATE webhook_dedup.conflict_log SET seen_at = {old} WHERE source = ANY(%s)", (sources,))
        # one source kept for less than its provider's retry horizon (Stripe: 3 days)
        conn.execute("INSERT INTO webhook_dedup.sources (source, provider, retention)"
                     " VALUES ('hist-src-0', 'stripe', '1 day')")
        per_port = Counter(placement_port(conn, "keys", s) for s in sources)

    def history(conn):
        """(watermarks, conflicts, claim counts older than a day, replay
        guards) of the sources (the passes flush the counts of the claims
        above: this hour's)"""
        return conn.execute("SELECT (SELECT count(*) FROM webhook_dedup.watermarks WHERE source = ANY(%s)),"
                            " (SELECT count(*) FROM webhook_dedup.conflict_log WHERE source = ANY(%s)),"
                            " (SELECT count(*) FROM webhook_dedup.claim_counts WHERE source = ANY(%s)"
                            "   AND bucket < now() - interval '1 day'),"
                            " (SELECT count(*) FROM webhook_dedup.replay_guards WHERE source = ANY(%s))",
                            (sources,) * 4).fetchone()

    pass_columns = "errors, history_pruned, retention_warnings"
    try:
        with cluster.coordinator.connect() as conn:
            assert history(conn) == (16, 8, 8, 8)
            errors, pruned, warned = conn.execute(f"SELECT {pass_columns} FROM webhook_dedup.run_maintenance()").fetchone()
            assert (errors, pruned) == ([], 0), "the coordinator holds no shard of these sources"
            assert warned >= 1
            assert one(conn, "SELECT count(*) FROM webhook_dedup.retention_warnings WHERE source = 'hist-src-0'") == 1
        for worker in cluster.workers:
            with worker.connect() as conn:
                errors, pruned, warned = conn.execute(
                    f"SELECT {pass_columns} FROM webhook_dedup.run_maintenance()").fetchone()
            assert (errors, pruned, warned) == ([], 4 * per_port[worker.port], 0), worker
        with cluster.connect() as conn:
            assert history(conn) == (8, 0, 0, 0), "only the young watermarks are left"
            assert one(conn, "SELECT count(*) FROM webhook_dedup.watermarks"
                             " WHERE source = ANY(%s) AND entity_id = 'young'", (sources,)) == 8
    finally:
        with cluster.connect() as conn:
            conn.execute("DELETE FROM webhook_dedup.sources WHERE source = 'hist-src-0'")


def test_the_metrics_views_on_the_coordinator_count_the_calls_of_every_node(no_background_passes):
    """A call delegated to a worker is counted in that worker's shared
    memory; the views on the coordinator show every node's live counts,
    and, once the workers flushed them, the same totals from claim_counts."""
    cluster = no_background_passes
    sources = [f"metric-src-{i}" for i in range(8)]

    def totals(conn):
        return conn.execute("SELECT sum(deliveries), sum(duplicates) FROM webhook_dedup.duplicate_metrics"
                            " WHERE source = ANY(%s)", (sources,)).fetchone()

    with cluster.connect() as conn:
        for s in sources:
            for key in ("a", "b", "c", "a", "b"):  # each call alone: delegated
                conn.execute("SELECT outcome FROM webhook_dedup.webhook_claim(%s, %s)", (s, key))
        assert {placement_port(conn, "keys", s) for s in sources} == {w.port for w in cluster.workers}
        assert totals(conn) == (40, 16)
        assert one(conn, "SELECT count(*) FROM webhook_dedup.metrics_live() WHERE source = ANY(%s)",
                   (sources,)) == 0, "the calls ran on the workers, not here"
    for worker in cluster.workers:
        with worker.connect() as conn:
            conn.execute("SELECT webhook_dedup.flush_metrics()")
    with cluster.connect() as conn:
        assert totals(conn) == (40, 16), "flushed, each count once"
        assert one(conn, "SELECT sum(deliveries) FROM webhook_dedup.claim_counts"
                         " WHERE source = ANY(%s) AND bucket_width = '1 hour'", (sources,)) == 40


def test_every_view_answers_on_the_coordinator(distributed):
    """Every view of the schema, and the alert function, plan and answer on
    a distributed install, as the superuser and as a webhook_dedup_reader."""
    with distributed.connect() as conn:
        conn.execute("DROP ROLE IF EXISTS dist_analyst")
        conn.execute("CREATE ROLE dist_analyst LOGIN IN ROLE webhook_dedup_reader")
        views = [r[0] for r in conn.execute(
            "SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'webhook_dedup'::regnamespace"
            " AND c.relkind = 'v' ORDER BY 1").fetchall()]
    assert len(views) >= 12
    try:
        for user in ("postgres", "dist_analyst"):
            with distributed.connect(user=user) as conn:
                for view in views:
                    conn.execute(f"SELECT * FROM webhook_dedup.{view} LIMIT 5").fetchall()
                conn.execute("SELECT * FROM webhook_dedup.duplicate_rate_alerts()").fetchall()
        with distributed.connect(user="dist_analyst") as conn:
            # what distribute() granted the readers leaves the secrets out
            for query in ("SELECT claim_token FROM webhook_dedup.keys", "SELECT fingerprint FROM webhook_dedup.keys",
                          "SELECT payload FROM webhook_dedup.payloads", "SELECT * FROM webhook_dedup.source_secrets",
                          "SELECT * FROM webhook_dedup.replay_guards"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(query)
    finally:
        with distributed.connect() as conn:
            conn.execute("DROP ROLE dist_analyst")


# Every function distribute() registers, with a NULL source, in the shapes
# Citus delegates (a call alone in the select list or in FROM), reached
# through a literal, a folded expression, a default, an inlined SQL
# function and a bound parameter.
NULL_SOURCE_CALLS = [
    "SELECT webhook_dedup.webhook_claim(NULL, 'k', 'x'::bytea)",
    "SELECT * FROM webhook_dedup.webhook_claim(NULL, 'k')",
    "SELECT webhook_dedup.webhook_claim(NULLIF('a', 'a'), 'k')",
    "SELECT * FROM webhook_dedup.webhook_claim_many(NULL, ARRAY['k'])",
    "SELECT webhook_dedup.webhook_complete(NULL, 'k', gen_random_uuid())",
    "SELECT webhook_dedup.webhook_fail(NULL, 'k', gen_random_uuid(), 'e')",
    "SELECT webhook_dedup.webhook_mark_unknown(NULL, 'k', gen_random_uuid(), 'e')",
    "SELECT webhook_dedup.webhook_checkpoint(NULL, 'k', gen_random_uuid(), 's')",
    "SELECT webhook_dedup.webhook_extend_lease(NULL, 'k', gen_random_uuid(), '1 minute')",
    "SELECT * FROM webhook_dedup.webhook_enqueue(NULL, 'k', 'x'::bytea)",
    "SELECT webhook_dedup.webhook_advance(NULL, 'e', now())",
    "SELECT webhook_dedup.webhook_resolve(NULL, 'k', 'failed')",
    "SELECT webhook_dedup.webhook_forget(NULL, 'k')",
    "WITH c AS (SELECT webhook_dedup.webhook_forget(NULL, 'k')) SELECT * FROM c",
    "SELECT webhook_dedup.reconcile(NULL, 'e', 'x'::bytea)",
    "SELECT * FROM webhook_dedup.unseen(NULL, ARRAY['e'])",
    # the scheme NULL too: no name to stand for the source
    "SELECT * FROM webhook_dedup.webhook_receive(NULL, 'x'::bytea, '{}')",
]


def test_a_null_source_is_answered_as_on_one_server(distributed):
    """Citus 13.2 hashes a delegated function's distribution argument
    without a NULL check: a NULL source crashed the coordinator (any role
    that can connect: planning comes before the EXECUTE check). The guard
    (src/citus_guard.rs) keeps such a call from being delegated, and it
    answers as on one server: 22004 for a role that may call it, 42501 for
    one that may not."""
    with distributed.connect() as conn:
        started = one(conn, "SELECT pg_postmaster_start_time()")
        conn.execute("DROP ROLE IF EXISTS dist_stranger")
        conn.execute("CREATE ROLE dist_stranger LOGIN")
    try:
        for user, refused in (("postgres", psycopg.errors.NullValueNotAllowed),
                              ("dist_stranger", psycopg.errors.InsufficientPrivilege)):
            with distributed.connect(user=user) as conn:
                for query in NULL_SOURCE_CALLS:
                    with pytest.raises(refused):
                        conn.execute(query)
                conn.execute("CREATE FUNCTION pg_temp.forget(s text) RETURNS boolean"
                             " LANGUAGE sql AS $$SELECT webhook_dedup.webhook_forget(s, 'k')$$")
                with pytest.raises(refused):
                    conn.execute("SELECT pg_temp.forget(NULL)")
                # a prepared statement: after five custom plans, the parameter is bound at planning
                for _ in range(7):
                    with pytest.raises(refused):
                        conn.execute("SELECT webhook_dedup.webhook_forget(%s, 'k')", (None,), prepare=True)
        with distributed.connect() as conn:
            assert one(conn, "SELECT pg_postmaster_start_time()") == started, "the coordinator restarted"
            assert one(conn, "SELECT outcome FROM webhook_dedup.webhook_claim('null-guard', 'k')") == "claimed"
    finally:
        with distributed.connect() as conn:
            conn.execute("DROP ROLE dist_stranger")


def test_webhook_receive_is_delegated_by_its_source_or_its_schemes_name(no_background_passes):
    """webhook_receive runs on the node that holds its source: the one
    named, or, without one, the scheme's name (what a NULL source means),
    and answers there as on one server."""
    cluster = no_background_passes
    body = b'{"zen": "delegated"}'
    with cluster.connect() as conn:
        headers = one(conn, "SELECT webhook_dedup.webhook_sign('github', %s, 's3cret')"
                            " || jsonb_build_object('X-GitHub-Delivery', 'delegated-1')", (body,))
    for source in (None, "gh-delegated"):
        stored_as = source or "github"
        with cluster.connect() as conn:
            receive = ("SELECT verified, outcome, idem_key FROM webhook_dedup.webhook_receive('github', %s, %s, ARRAY['s3cret'],"
                       " source => %s)")
            verified, outcome, idem_key = conn.execute(receive, (body, Jsonb(headers), source)).fetchone()
            assert (verified, outcome) == (True, "claimed")
            assert conn.execute(receive, (body, Jsonb(headers), source)).fetchone()[:2] == (True, "in_progress")
            assert one(conn, "SELECT source FROM webhook_dedup.keys WHERE idem_key = %s", (idem_key,)) == stored_as
            assert one(conn, "SELECT count(*) FROM webhook_dedup.metrics_live() WHERE source = %s",
                       (stored_as,)) == 0, "delegated: counted on the worker, not here"
            port = placement_port(conn, "keys", stored_as)
        with cluster.worker_at(port).connect() as conn:
            assert one(conn, "SELECT sum(counts[1]) FROM webhook_dedup.metrics_live()"
                             " WHERE source = %s AND NOT minute", (stored_as,)) == 2, "both deliveries ran here"


def test_a_duplicate_during_a_shard_move_answers_duplicate(distributed):
    """A completed key's source moves to the other worker
    (citus_move_shard_placement in its default mode, logical replication,
    which moves the co-located tables together) while its duplicate is
    delivered again and again: every delivery answers duplicate with the
    stored result, before, during and after the move."""
    source, key = "moving-src", "evt_moving"
    with distributed.connect() as conn:
        token = one(conn, "SELECT claim_token FROM webhook_dedup.webhook_claim(%s, %s)", (source, key))
        assert one(conn, "SELECT webhook_dedup.webhook_complete(%s, %s, %s, '{\"n\": 1}')", (source, key, token)) is True
        shard = one(conn, "SELECT get_shard_id_for_distribution_column('webhook_dedup.keys', %s::text)", (source,))
        before = placement_port(conn, "keys", source)
    target = next(w for w in distributed.workers if w.port != before)
    answers, stop = Counter(), threading.Event()

    def redeliver():
        with distributed.connect() as conn:
            conn.execute("SET statement_timeout = '60s'")
            while not stop.is_set():
                answers[conn.execute("SELECT outcome, result FROM webhook_dedup.webhook_claim(%s, %s)",
                                     (source, key)).fetchone()[0]] += 1

    with ThreadPoolExecutor(2) as pool:
        redeliveries = [pool.submit(redeliver) for _ in range(2)]
        try:
            time.sleep(0.3)
            with distributed.connect() as conn:
                conn.execute("SET statement_timeout = '120s'")  # fail, do not hang the layer
                # the default transfer mode: logical replication, the
                # deliveries going on meanwhile
                conn.execute("SELECT citus_move_shard_placement(%s, %s, %s, %s, %s)",
                             (shard, "127.0.0.1", before, "127.0.0.1", target.port))
                assert placement_port(conn, "keys", source) == target.port
            time.sleep(0.3)
        finally:
            stop.set()  # also when the move failed: the pool waits for these
        for r in redeliveries:
            r.result()
    assert set(answers) == {"duplicate"} and sum(answers.values()) > 10, answers
    with distributed.connect() as conn:
        assert conn.execute("SELECT outcome, result FROM webhook_dedup.webhook_claim(%s, %s)", (source, key)).fetchone() == (
            "duplicate", {"n": 1})


def test_distribute_refuses_a_node_that_does_not_preload_webhook_dedup(distributed):
    """The guard against a NULL source (and each node's maintenance) lives
    in the preloaded library: distribute() names a node without it (55000),
    and the library, loaded there later, warns."""
    worker = distributed.workers[-1]
    with worker.connect() as conn:
        conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'citus'")
    worker.stop()
    worker.start()
    try:
        with worker.connect() as conn:
            warnings = []
            conn.add_notice_handler(lambda diagnostic: warnings.append(diagnostic.message_primary))
            conn.execute("LOAD 'webhook_dedup'")
            assert any("not in shared_preload_libraries while citus is" in w for w in warnings), warnings
        with distributed.connect() as conn:
            with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState,
                               match="shared_preload_libraries on every node"):
                conn.execute("SELECT webhook_dedup.distribute()")
    finally:
        with worker.connect() as conn:
            conn.execute("ALTER SYSTEM RESET shared_preload_libraries")
        worker.stop()
        worker.start()
    with distributed.connect() as conn:
        assert one(conn, "SELECT webhook_dedup.distribute()").startswith("webhook_dedup is distributed")


def test_a_worker_killed_under_load_loses_no_completed_key_and_every_claim_recovers(distributed):
    """Last in the file (it leaves a restarted worker behind). 8 connections claim and complete keys of 8 sources (both workers)
    through the coordinator, each side effect in one transaction with its
    completion; a worker is stopped with -m immediate in the middle (the
    live counters of the other nodes are read meanwhile, it is left out with
    a WARNING) and started again. Every completion the client saw commit is still there
    with its one side effect; every key whose claim or completion failed
    (or never ran) is claimed again after its lease and completed."""
    sources = [f"crash-src-{i}" for i in range(8)]
    lease = 2.0
    with distributed.connect() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS crash_effects (source text COLLATE \"C\" NOT NULL,"
                     " idem_key text COLLATE \"C\" NOT NULL)")
        if not one(conn, "SELECT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'crash_effects'::regclass)"):
            conn.execute("SELECT create_distributed_table('crash_effects', 'source', colocate_with => 'webhook_dedup.keys')")
    victim = distributed.workers[0]
    completed, stop = set(), threading.Event()
    lock = threading.Lock()

    def load(n):
        i = 0
        while not stop.is_set():
            source, key = sources[(n + i) % len(sources)], f"k{n}_{i}"
            i += 1
            try:
                with distributed.connect() as conn:
                    conn.execute("SET statement_timeout = '30s'")
                    outcome, token = conn.execute(
                        "SELECT outcome, claim_token FROM webhook_dedup.webhook_claim(%s, %s, lease => %s::interval)",
                        (source, key, f"{lease} seconds")).fetchone()
                    assert outcome == "claimed"
                    with conn.transaction():
                        conn.execute("INSERT INTO crash_effects VALUES (%s, %s)", (source, key))
                        assert one(conn, "SELECT webhook_dedup.webhook_complete(%s, %s, %s)", (source, key, token)) is True
                with lock:
                    completed.add((source, key))
            except psycopg.Error:
                time.sleep(0.05)  # the worker is down: the provider would retry later
        return i

    warnings = []
    with ThreadPoolExecutor(8) as pool:
        attempts = pool.map(load, range(8))
        try:
            time.sleep(2)
            victim.stop("immediate")
            down = time.monotonic()
            # the live counters of the nodes still up are read, the one down
            # left out with a WARNING (the views, which also read every
            # shard of claim_counts, wait for the worker like any query)
            with distributed.connect() as conn:
                conn.execute("SET statement_timeout = '20s'")
                conn.add_notice_handler(lambda diagnostic: warnings.append(diagnostic.message_primary))
                conn.execute("SELECT count(*) FROM webhook_dedup.metrics_live_cluster()").fetchone()
            time.sleep(max(0.0, 1 - (time.monotonic() - down)))
            victim.start()
            time.sleep(2)
        finally:
            stop.set()  # also when a step above failed: the pool waits for the load
        tried = {(sources[(n + i) % len(sources)], f"k{n}_{i}") for n, count in enumerate(attempts) for i in range(count)}
    assert any("live counters of Citus node" in w and "could not be read" in w for w in warnings), warnings
    with distributed.connect() as conn:
        victim_sources = {s for s in sources if placement_port(conn, "keys", s) == victim.port}
    assert victim_sources and victim_sources != set(sources), "the load used both workers"
    assert {s for s, _ in completed} & victim_sources, "keys of the killed worker completed before it died"

    time.sleep(lease + 0.5)  # every lease the crash left behind has expired
    with distributed.connect() as conn:
        for source, key in sorted(tried - completed):
            outcome, token = conn.execute("SELECT outcome, claim_token FROM webhook_dedup.webhook_claim(%s, %s)",
                                          (source, key)).fetchone()
            if outcome == "duplicate":
                continue  # it committed, but the answer was lost with the connection
            assert outcome in ("claimed", "reclaimed"), (source, key, outcome)
            with conn.transaction():
                conn.execute("INSERT INTO crash_effects VALUES (%s, %s)", (source, key))
                assert one(conn, "SELECT webhook_dedup.webhook_complete(%s, %s, %s)", (source, key, token)) is True
        states = dict(conn.execute("SELECT state, count(*) FROM webhook_dedup.keys WHERE source = ANY(%s)"
                                   " GROUP BY state", (sources,)).fetchall())
        assert states == {"completed": len(tried)}, states
        effects = conn.execute("SELECT source, idem_key, count(*) FROM crash_effects GROUP BY 1, 2").fetchall()
    assert {(s, k) for s, k, _ in effects} == tried
    assert [e for e in effects if e[2] != 1] == [], "one side effect per key, none lost, none twice"
