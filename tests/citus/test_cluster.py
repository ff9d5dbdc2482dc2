"""The distributed layer's cluster itself (before any distributed mode): a
Citus coordinator and two workers on loopback, webhook_dedup created on the
coordinator and propagated to both workers at one version, both workers
active, the maintenance worker running on every node, and a worker stopped
with -m immediate and started again rejoining by itself (what the crash
tests of the distributed mode build on).
"""

from citus_cluster import LOOPBACK, wait_for

WORKER = "webhook_dedup maintenance"  # src/worker.rs NAME


def one(conn, query, params=()):
    return conn.execute(query, params).fetchone()[0]


def test_the_extension_is_on_every_node_at_one_version(citus):
    with citus.connect() as conn:
        available = one(conn, "SELECT default_version FROM pg_available_extensions WHERE name = 'webhook_dedup'")
        citus_version = one(conn, "SELECT extversion FROM pg_extension WHERE extname = 'citus'")
        # as the coordinator sees it: one row per node, the coordinator too
        seen = conn.execute(
            "SELECT n.nodeport, r.success, r.result FROM run_command_on_all_nodes("
            "  $$SELECT extversion FROM pg_extension WHERE extname = 'webhook_dedup'$$) r"
            "  JOIN pg_dist_node n USING (nodeid) ORDER BY n.nodeport").fetchall()
    assert seen == sorted((n.port, True, available) for n in citus.nodes)
    # and as each node says itself
    for node in citus.nodes:
        with node.connect() as conn:
            assert conn.execute("SELECT extname, extversion FROM pg_extension"
                                " WHERE extname IN ('citus', 'webhook_dedup') ORDER BY extname").fetchall() \
                == [("citus", citus_version), ("webhook_dedup", available)], node
            assert one(conn, "SHOW shared_preload_libraries") == "citus,webhook_dedup", node
            assert one(conn, "SELECT to_regproc('webhook_dedup.webhook_claim') IS NOT NULL"), node
    assert citus_version == citus.citus_extversion
    # the release loaded, which the fast path's version rule reads
    # (src/citus.rs fast_path_verified): 13.2.x for 13.2-1, 14.0.x for 14.0-1
    with citus.connect() as conn:
        release = one(conn, "SHOW citus.version")
    assert release.startswith(citus_version.rsplit("-", 1)[0] + "."), release


def test_the_coordinator_sees_both_workers_active(citus):
    with citus.connect() as conn:
        active = conn.execute("SELECT node_name, node_port FROM citus_get_active_worker_nodes()"
                              " ORDER BY node_port").fetchall()
        nodes = conn.execute("SELECT groupid, nodename, nodeport, noderole, isactive, shouldhaveshards"
                             "  FROM pg_dist_node ORDER BY groupid").fetchall()
    assert active == sorted((LOOPBACK, w.port) for w in citus.workers)
    coordinator, *workers = nodes
    # the coordinator is group 0 and holds no shards; each worker is a
    # primary of its own group that takes shards
    assert coordinator == (0, LOOPBACK, citus.coordinator.port, "primary", True, False)
    assert sorted(w[2] for w in workers) == sorted(w.port for w in citus.workers)
    assert all(w[3:] == ("primary", True, True) for w in workers), workers


def test_the_maintenance_worker_runs_on_every_node(citus):
    """The library is preloaded on every node, so every node runs its own
    webhook_dedup maintenance worker against its own tables (the distributed
    mode has to keep each to what is local to it)."""
    for node in citus.nodes:
        with node.connect() as conn:
            wait_for(f"the maintenance worker on the {node.name}",
                     lambda: one(conn, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = %s", (WORKER,)),
                     15)
        assert 'webhook_dedup maintenance worker started in database "postgres"' in node.log_text(), node


def test_a_worker_stopped_immediately_rejoins_when_started(citus):
    """The crash tests' step: stop a worker with -m immediate, the coordinator
    cannot reach it, start it again on the same port and the coordinator
    runs commands on it again, with no step of ours."""
    worker = citus.workers[-1]
    probe = "SELECT nodeport, success FROM run_command_on_workers('SELECT 1') ORDER BY nodeport"
    worker.stop("immediate")
    try:
        with citus.connect() as conn:
            reached = dict(conn.execute(probe).fetchall())
        assert reached == {w.port: w is not worker for w in citus.workers}
    finally:
        worker.start()
    with citus.connect() as conn:
        wait_for("the coordinator to reach the restarted worker",
                 lambda: all(ok for _, ok in conn.execute(probe).fetchall()), 30,
                 detail=lambda: conn.execute(probe).fetchall())
        assert conn.execute("SELECT count(*) FROM citus_get_active_worker_nodes()").fetchone()[0] == 2
    with citus.connect() as conn, worker.connect() as there:
        assert citus.extension_version(there) == citus.extension_version(conn)
