"""Claims while maintenance deletes keys past retention, on a cluster of
their own (log_lock_waits on, deadlock_timeout 1 s: every lock wait longer
than a second is logged).

Claims from six connections while maintenance passes delete eight days of
expired keys: no claim fails, no key is claimed twice, the keys that must
live on are all there afterwards and unchanged, every other expired key is
gone, and no lock wait reaches one second (the passes skip the rows claims
hold, and hold theirs only for one batch).
"""

import random
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from own_cluster import OwnCluster


@pytest.fixture(scope="module")
def cluster():
    c = OwnCluster({"log_lock_waits": "on", "deadlock_timeout": "'1s'"})
    try:
        with c.connect() as conn:
            conn.execute("CREATE DATABASE load")
        with c.connect("load") as conn:
            conn.execute("CREATE EXTENSION webhook_dedup")
        yield c
    finally:
        c.destroy()


def claim(conn, source, key):
    return conn.execute("SELECT outcome, claim_token FROM webhook_dedup.webhook_claim(%s, %s, lease => '1 minute')",
                        (source, key)).fetchone()


DAYS = 8
EXPIRED_PER_DAY = 3000
HOT_PER_DAY = 10
CLAIMERS = 6
CLAIM_SECONDS = 14
PASS_EVERY_S = 0.2
DELETE_DEADLINE_S = 40


def fill_old_keys(conn):
    """Eight days of 2020: expired completed keys (x), processing keys with a
    live lease (hot) and completed keys active today (warm)."""
    for day in range(1, DAYS + 1):
        t = f"2020-01-{day:02} 12:00+00"
        conn.execute(f"""
            INSERT INTO webhook_dedup.keys (source, idem_key, state, attempt, claim_token, lease_expires_at,
                                            due_at, first_seen_at, last_seen_at, completed_at, expires_at)
            SELECT 'load', 'x{day}-' || i, 'completed', 1, NULL::uuid, NULL::timestamptz, NULL::timestamptz,
                   '{t}'::timestamptz, '{t}'::timestamptz, '{t}'::timestamptz, '{t}'::timestamptz + interval '30 days'
              FROM generate_series(1, {EXPIRED_PER_DAY}) i
            UNION ALL
            SELECT 'load', 'hot{day}-' || i, 'processing', 1, gen_random_uuid(), now() + interval '1 hour',
                   now() + interval '1 hour', '{t}', '{t}', NULL, NULL
              FROM generate_series(1, {HOT_PER_DAY}) i
            UNION ALL
            SELECT 'load', 'warm{day}-' || i, 'completed', 1, NULL, NULL, NULL, '{t}', now(), '{t}',
                   '{t}'::timestamptz + interval '30 days'
              FROM generate_series(1, {HOT_PER_DAY}) i""")


def expired_left(conn) -> int:
    return conn.execute("SELECT count(*) FROM webhook_dedup.keys WHERE source = 'load' AND idem_key LIKE 'x%'"
                        " AND last_seen_at < now() - interval '1 day'").fetchone()[0]


def test_claims_while_maintenance_deletes_expired_keys(cluster):
    with cluster.connect("load") as admin:
        fill_old_keys(admin)
        live = {k: (state, token) for k, state, token in admin.execute(
            "SELECT idem_key, state, claim_token FROM webhook_dedup.keys"
            " WHERE source = 'load' AND (idem_key LIKE 'hot%' OR idem_key LIKE 'warm%')").fetchall()}
        assert len(live) == 2 * DAYS * HOT_PER_DAY
    log_before = len(cluster.log_text())

    claimed = {}  # key -> how many 'claimed' outcomes
    touched = set()  # expired keys a delivery reached before maintenance deleted them
    guard = threading.Lock()
    latencies, failures = [], []
    stop = threading.Event()

    def claimer(n: int):
        rng = random.Random(n)
        mine = []
        with cluster.connect("load") as conn:
            i = 0
            while not stop.is_set():
                i += 1
                roll = rng.random()
                if roll < 0.45 or not mine:
                    key = f"new-{n}-{i}"
                    mine.append(key)
                elif roll < 0.80:
                    day = rng.randint(1, DAYS)
                    key = f"{rng.choice(('hot', 'warm'))}{day}-{rng.randint(1, HOT_PER_DAY)}"
                elif roll < 0.98:
                    key = rng.choice(mine)
                else:
                    key = f"x{rng.randint(1, DAYS)}-{rng.randint(1, EXPIRED_PER_DAY)}"
                started = time.monotonic()
                try:
                    outcome, token = claim(conn, "load", key)
                    if outcome == "claimed" and key.startswith("new-") and rng.random() < 0.5:
                        conn.execute("SELECT webhook_dedup.webhook_complete('load', %s, %s)", (key, token))
                except Exception as exc:  # every failure is a test failure, reported below
                    failures.append(f"{key}: {exc!r}")
                    continue
                with guard:
                    latencies.append(time.monotonic() - started)
                    if outcome == "claimed":
                        claimed[key] = claimed.get(key, 0) + 1
                    if key.startswith("x") and outcome == "duplicate":
                        touched.add(key)
                    if key.startswith(("hot", "warm")) and outcome not in ("in_progress", "duplicate"):
                        failures.append(f"{key}: {outcome}")

    passes = []

    def maintenance():
        with cluster.connect("load") as conn:
            deadline = time.monotonic() + DELETE_DEADLINE_S
            while time.monotonic() < deadline and (expired_left(conn) > 0 or not stop.is_set()):
                passes.append(conn.execute(
                    "SELECT keys_pruned, keys_kept, errors FROM webhook_dedup.run_maintenance()").fetchone())
                time.sleep(PASS_EVERY_S)

    with ThreadPoolExecutor(CLAIMERS + 1) as pool:
        futures = [pool.submit(claimer, n) for n in range(CLAIMERS)]
        deleting = pool.submit(maintenance)
        time.sleep(CLAIM_SECONDS)
        stop.set()
        for f in futures:
            f.result()
        deleting.result()

    latencies.sort()
    pruned = sum(p[0] for p in passes)
    print(f"\n{len(latencies)} claims on {CLAIMERS} connections during {len(passes)} maintenance passes "
          f"that deleted {pruned} keys; claim latency median {statistics.median(latencies) * 1000:.1f} ms, "
          f"p99 {latencies[int(len(latencies) * 0.99)] * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms; "
          f"steps failed: {sum(len(p[2]) for p in passes)}")
    assert not failures, failures[:10]
    assert not [k for k, n in claimed.items() if n > 1], "a key was claimed twice"
    with cluster.connect("load") as admin:
        assert expired_left(admin) == 0, "every key past retention was deleted"
        assert pruned >= DAYS * EXPIRED_PER_DAY - len(touched) - len(claimed)
        after = {k: (state, token) for k, state, token in admin.execute(
            "SELECT idem_key, state, claim_token FROM webhook_dedup.keys"
            " WHERE source = 'load' AND (idem_key LIKE 'hot%' OR idem_key LIKE 'warm%')").fetchall()}
        assert after == live, "every key that must live on is there, unchanged"
        kept = admin.execute("SELECT count(*) FROM webhook_dedup.keys WHERE source = 'load' AND idem_key = ANY(%s)",
                             (list(touched),)).fetchone()[0]
        assert kept == len(touched), "an expired key a late delivery reached lives on"
    waits = [line for line in cluster.log_text()[log_before:].splitlines() if "still waiting for" in line]
    assert not waits, f"lock waits of a second or more: {waits[:5]}"
