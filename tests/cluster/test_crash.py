"""Killed backends and a crashed server never lose a completed key, and
leave every unfinished claim reclaimable and every queued key drainable
(the claim issue's crash test)."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

LEASE = "1 second"


def claim(conn, source, key, lease=LEASE):
    return conn.execute(
        "SELECT outcome, claim_token, attempt FROM webhook_dedup.webhook_claim(%s, %s, lease => %s::interval)",
        (source, key, lease)).fetchone()


def terminate(conn, pid):
    assert conn.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,)).fetchone()[0]


def test_a_killed_backend_frees_an_uncommitted_claim(connect):
    with connect() as observer:
        victim = connect()
        victim.autocommit = False
        pid = victim.info.backend_pid
        assert claim(victim, "crash", "in_txn")[0] == "claimed"  # inside an open transaction
        terminate(observer, pid)
        with pytest.raises(psycopg.OperationalError):
            victim.execute("SELECT 1")
        # the transaction died with the backend: the key was never stored
        assert claim(observer, "crash", "in_txn")[:1] == ("claimed",)


def test_a_killed_backend_leaves_a_committed_claim_reclaimable(connect):
    lease_s = 5.0  # ample for the terminate and the check below on a loaded machine
    with connect() as observer:
        victim = connect()
        pid = victim.info.backend_pid
        claimed_at = time.monotonic()
        outcome, _, attempt = claim(victim, "crash", "committed", f"{lease_s} seconds")
        assert (outcome, attempt) == ("claimed", 1)
        terminate(observer, pid)
        assert claim(observer, "crash", "committed")[0] == "in_progress"
        time.sleep(max(0.0, claimed_at + lease_s + 0.2 - time.monotonic()))
        outcome, token, attempt = claim(observer, "crash", "committed")
        assert (outcome, attempt) == ("reclaimed", 2)
        assert observer.execute("SELECT webhook_dedup.webhook_complete('crash', 'committed', %s)", (token,)).fetchone()[0]


def test_a_server_crash_mid_load_loses_no_completed_key(connect, server):
    """Claims, completions and enqueues run on 8 connections when the server
    is stopped with -m immediate; after restart, every completion a client
    saw acknowledged is still there, every claim left unfinished is
    reclaimable once its lease expires, and webhook_next drains every
    acknowledged enqueue."""
    stop = threading.Event()
    acknowledged = {"completed": set(), "claimed": set(), "enqueued": set()}
    lock = threading.Lock()

    def load(worker):
        i = 0
        try:
            with connect() as conn:
                while not stop.is_set():
                    key = f"w{worker}_{i}"
                    i += 1
                    if i % 3 == 0:
                        conn.execute("SELECT webhook_dedup.webhook_enqueue('crashq', %s, 'p'::bytea)", (key,))
                        kind = "enqueued"
                    else:
                        outcome, token, _ = claim(conn, "crashl", key, "2 seconds")
                        assert outcome == "claimed"
                        with lock:
                            acknowledged["claimed"].add(key)
                        if i % 2 == 0:  # every other claim is left unfinished, as by a crashed handler
                            continue
                        assert conn.execute("SELECT webhook_dedup.webhook_complete('crashl', %s, %s)", (key, token)).fetchone()[0]
                        kind = "completed"
                    with lock:
                        acknowledged[kind].add(key)
        except psycopg.OperationalError:
            pass  # the server went away mid-call: that call was not acknowledged

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(load, w) for w in range(8)]
        time.sleep(2.0)
        server.crash()
        stop.set()
        for f in futures:
            f.result()
    server.start()

    assert len(acknowledged["completed"]) > 50, "the load ran"
    with connect() as conn:
        completed = {k for (k,) in conn.execute(
            "SELECT idem_key FROM webhook_dedup.keys WHERE source = 'crashl' AND state = 'completed'")}
        assert acknowledged["completed"] <= completed, "no acknowledged completion was lost"

        unfinished = acknowledged["claimed"] - acknowledged["completed"]
        time.sleep(2.2)  # the unfinished claims' 2 s leases expire
        for key in sorted(unfinished):
            outcome, _, attempt = claim(conn, "crashl", key)
            assert outcome in ("reclaimed", "duplicate"), (key, outcome)
            # "duplicate" only if the completion committed but its answer was lost in the crash
            assert outcome == "reclaimed" or key in completed

        drained = set()
        while True:
            batch = conn.execute("SELECT idem_key FROM webhook_dedup.webhook_next('crashq', batch => 1000)").fetchall()
            if not batch:
                break
            drained.update(k for (k,) in batch)
        assert acknowledged["enqueued"] <= drained, "every acknowledged enqueue is drained"
