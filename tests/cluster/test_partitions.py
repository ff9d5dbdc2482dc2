"""Uniqueness across partition boundaries, and claims while maintenance drops
partitions, on a cluster of their own (log_lock_waits on, deadlock_timeout
1 s: every lock wait longer than a second is logged).

- Two first deliveries of one key that straddle a partition boundary: the
  second waits for the first's key lock, then finds its row in the older
  partition (in_progress), or claims it in the newer one when the first
  rolled back; a retry after the boundary of a completed key is a duplicate.
- Claims from six connections while maintenance drops eight partitions past
  retention: no claim fails, no key is claimed twice, the keys that must
  live on are all there afterwards, and no lock wait reaches one second.
"""

import contextlib
import random
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from own_cluster import OwnCluster, wait_for


@pytest.fixture(scope="module")
def cluster():
    c = OwnCluster({"log_lock_waits": "on", "deadlock_timeout": "'1s'"})
    try:
        with c.connect() as conn:
            conn.execute("CREATE DATABASE straddle")
            conn.execute("CREATE DATABASE load")
        for db in ("straddle", "load"):
            with c.connect(db) as conn:
                conn.execute("CREATE EXTENSION webhook_dedup")
        yield c
    finally:
        c.destroy()


def claim(conn, source, key):
    return conn.execute("SELECT outcome, claim_token FROM webhook_claim(%s, %s, lease => '1 minute')",
                        (source, key)).fetchone()


def split_current_partition(conn, seconds_ahead: float) -> str:
    """Replace the partition holding now() by two, split `seconds_ahead` from
    now; returns the boundary (UTC text)."""
    lo, hi, name, boundary = conn.execute("""
        WITH p AS (
          SELECT c.oid::regclass::text AS name,
                 (regexp_match(pg_get_expr(c.relpartbound, c.oid), '''([^'']+)''.*''([^'']+)'''))[1:2] AS b
            FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
           WHERE i.inhparent = 'webhook_dedup.keys'::regclass AND c.relname <> 'keys_default')
        SELECT b[1]::timestamptz, b[2]::timestamptz, name,
               date_trunc('second', clock_timestamp() + make_interval(secs => %s))
          FROM p WHERE clock_timestamp() >= b[1]::timestamptz AND clock_timestamp() < b[2]::timestamptz""",
                                          (seconds_ahead,)).fetchone()
    assert lo < boundary < hi, "not too close to the end of the current partition"
    conn.execute(f"ALTER TABLE webhook_dedup.keys DETACH PARTITION {name}")
    conn.execute(f"DROP TABLE {name}")
    for part, (a, b) in (("before", (lo, boundary)), ("after", (boundary, hi))):
        conn.execute(f"CREATE TABLE webhook_dedup.straddle_{part} PARTITION OF webhook_dedup.keys"
                     " FOR VALUES FROM (%s) TO (%s)" % tuple(
                         conn.execute("SELECT quote_literal(%s::text)", (t,)).fetchone()[0] for t in (a, b)))
        conn.execute(f"CREATE UNIQUE INDEX ON webhook_dedup.straddle_{part} (source, idem_key)")
    return boundary


def home(conn, key):
    return conn.execute("SELECT tableoid::regclass::text, count(*) OVER (), deliveries FROM webhook_dedup.keys"
                        " WHERE source = 's' AND idem_key = %s", (key,)).fetchall()


def test_first_deliveries_straddling_a_partition_boundary(cluster):
    with cluster.connect("straddle") as admin:
        boundary = split_current_partition(admin, 4)
        first_commit = cluster.connect("straddle", autocommit=False)
        first_abort = cluster.connect("straddle", autocommit=False)
        # before the boundary: two first deliveries inside open transactions,
        # and one that completes
        assert claim(first_commit, "s", "race")[0] == "claimed"
        assert claim(first_abort, "s", "aborted")[0] == "claimed"
        _, token = claim(admin, "s", "retried")
        assert admin.execute("SELECT webhook_complete('s', 'retried', %s)", (token,)).fetchone()[0]
        now = admin.execute("SELECT clock_timestamp()").fetchone()[0]
        assert now < boundary
        time.sleep((boundary - now).total_seconds() + 0.3)
        assert admin.execute("SELECT clock_timestamp() > %s", (boundary,)).fetchone()[0]

        # after it: the second deliveries
        with ThreadPoolExecutor(2) as pool:
            second = {key: pool.submit(lambda k=key: claim(cluster.connect("straddle"), "s", k)[0])
                      for key in ("race", "aborted")}
            wait_for("both second deliveries waiting on the key locks", lambda: admin.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 22340 AND NOT granted"
            ).fetchone()[0] == 2, 5)
            assert not any(f.done() for f in second.values())
            first_commit.commit()
            first_abort.rollback()
            outcomes = {key: f.result(timeout=10) for key, f in second.items()}
        assert outcomes == {"race": "in_progress", "aborted": "claimed"}
        assert claim(admin, "s", "retried")[0] == "duplicate"

        assert home(admin, "race") == [("webhook_dedup.straddle_before", 1, 2)]
        assert home(admin, "aborted") == [("webhook_dedup.straddle_after", 1, 1)]
        assert home(admin, "retried") == [("webhook_dedup.straddle_before", 1, 2)]
        first_commit.close()
        first_abort.close()


DAYS = 8
EXPIRED_PER_DAY = 3000
HOT_PER_DAY = 10
CLAIMERS = 6
CLAIM_SECONDS = 14
PASS_EVERY_S = 1.0  # one drop a second: every drop overlaps the claims
DROP_DEADLINE_S = 40


def fill_old_partitions(conn):
    for day in range(1, DAYS + 1):
        table = f"webhook_dedup.keys_p202001{day:02}_0000"
        lo = f"2020-01-{day:02} 00:00+00"
        conn.execute(f"""
            CREATE TABLE {table} (LIKE webhook_dedup.keys INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
            CREATE UNIQUE INDEX ON {table} (source, idem_key);
            INSERT INTO {table} (source, idem_key, partition_at, state, attempt, claim_token, lease_expires_at,
                                 due_at, first_seen_at, last_seen_at, completed_at)
            SELECT 'load', 'x{day}-' || i, '{lo}'::timestamptz + interval '1 hour', 'completed', 1, NULL::uuid,
                   NULL::timestamptz, NULL::timestamptz, '{lo}'::timestamptz, '{lo}'::timestamptz,
                   '{lo}'::timestamptz
              FROM generate_series(1, {EXPIRED_PER_DAY}) i
            UNION ALL
            SELECT 'load', 'hot{day}-' || i, '{lo}'::timestamptz + interval '1 hour', 'processing', 1,
                   gen_random_uuid(), now() + interval '1 hour', now() + interval '1 hour', '{lo}', '{lo}', NULL
              FROM generate_series(1, {HOT_PER_DAY}) i
            UNION ALL
            SELECT 'load', 'warm{day}-' || i, '{lo}'::timestamptz + interval '1 hour', 'completed', 1, NULL, NULL,
                   NULL, '{lo}', now(), now()
              FROM generate_series(1, {HOT_PER_DAY}) i;
            ALTER TABLE webhook_dedup.keys ATTACH PARTITION {table}
              FOR VALUES FROM ('{lo}') TO ('{lo}'::timestamptz + interval '1 day')""")


def old_partitions_left(conn) -> int:
    return conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'keys_p202001%'").fetchone()[0]


def test_claims_while_maintenance_drops_partitions(cluster):
    with cluster.connect("load") as admin:
        fill_old_partitions(admin)
        live = {k: (state, token) for k, state, token in admin.execute(
            "SELECT idem_key, state, claim_token FROM webhook_dedup.keys"
            " WHERE source = 'load' AND (idem_key LIKE 'hot%' OR idem_key LIKE 'warm%')").fetchall()}
        assert len(live) == 2 * DAYS * HOT_PER_DAY
    log_before = len(cluster.log_text())

    claimed = {}  # key -> how many 'claimed' outcomes
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
                        conn.execute("SELECT webhook_complete('load', %s, %s)", (key, token))
                except Exception as exc:  # every failure is a test failure, reported below
                    failures.append(f"{key}: {exc!r}")
                    continue
                with guard:
                    latencies.append(time.monotonic() - started)
                    if outcome == "claimed":
                        claimed[key] = claimed.get(key, 0) + 1
                    if key.startswith(("hot", "warm")) and outcome not in ("in_progress", "duplicate"):
                        failures.append(f"{key}: {outcome}")

    passes = []

    def maintenance():
        with cluster.connect("load") as conn:
            deadline = time.monotonic() + DROP_DEADLINE_S
            while time.monotonic() < deadline and old_partitions_left(conn) > 0:
                passes.append(conn.execute(
                    "SELECT partitions_dropped, keys_carried_forward, errors FROM webhook_dedup.run_maintenance()"
                ).fetchone())
                time.sleep(PASS_EVERY_S)

    with ThreadPoolExecutor(CLAIMERS + 1) as pool:
        futures = [pool.submit(claimer, n) for n in range(CLAIMERS)]
        dropping = pool.submit(maintenance)
        time.sleep(CLAIM_SECONDS)
        stop.set()
        for f in futures:
            f.result()
        dropping.result()

    latencies.sort()
    dropped = sum(p[0] for p in passes)
    print(f"\n{len(latencies)} claims on {CLAIMERS} connections during {len(passes)} maintenance passes "
          f"that dropped {dropped} partitions; claim latency median {statistics.median(latencies) * 1000:.1f} ms, "
          f"p99 {latencies[int(len(latencies) * 0.99)] * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms; "
          f"steps given way: {sum(len(p[2]) for p in passes)}")
    assert not failures, failures[:10]
    assert not [k for k, n in claimed.items() if n > 1], "a key was claimed twice"
    with cluster.connect("load") as admin:
        assert old_partitions_left(admin) == 0, "every partition past retention was dropped"
        assert dropped == DAYS
        after = {k: (state, token) for k, state, token in admin.execute(
            "SELECT idem_key, state, claim_token FROM webhook_dedup.keys"
            " WHERE source = 'load' AND (idem_key LIKE 'hot%' OR idem_key LIKE 'warm%')").fetchall()}
        assert after == live, "every key that must live on is there, unchanged"
    waits = [line for line in cluster.log_text()[log_before:].splitlines() if "still waiting for" in line]
    assert not waits, f"lock waits of a second or more: {waits[:5]}"


def current_partition(conn):
    return conn.execute("""
        SELECT c.oid::regclass::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'webhook_dedup.keys'::regclass AND c.relname <> 'keys_default'
           AND clock_timestamp() >= (regexp_match(pg_get_expr(c.relpartbound, c.oid), '''([^'']+)'''))[1]::timestamptz
         ORDER BY c.relname DESC LIMIT 1""").fetchone()


@contextlib.contextmanager
def without_current_partition(cluster, database):
    """A new database with the extension whose current partition is gone
    (as if maintenance had not run for longer than the premade partitions
    lasted); yields a connection to it and the missing partition's name."""
    with cluster.connect() as conn:
        conn.execute(f"CREATE DATABASE {database}")
    with cluster.connect(database) as admin:
        admin.execute("CREATE EXTENSION webhook_dedup")
        (table,) = current_partition(admin)
        admin.execute(f"ALTER TABLE webhook_dedup.keys DETACH PARTITION {table}")
        admin.execute(f"DROP TABLE {table}")
        yield admin, table


def set_batch_size(conn, size):
    """ALTER SYSTEM webhook_dedup.batch_size (None: reset) and wait for the reload."""
    if size is None:
        conn.execute("ALTER SYSTEM RESET webhook_dedup.batch_size")
    else:
        conn.execute(f"ALTER SYSTEM SET webhook_dedup.batch_size = {int(size)}")
    conn.execute("SELECT pg_reload_conf()")
    expected = "1000" if size is None else str(size)
    wait_for("the reload", lambda: conn.execute("SHOW webhook_dedup.batch_size").fetchone()[0] == expected, 10)


def test_a_missing_current_partition_is_made_while_claims_continue(cluster):
    """Maintenance did not run for longer than the premade partitions lasted:
    keys land in the default partition. The next passes make the current
    partition again, moving those keys into it, while claims go on. (The
    batch is raised so that every stray fits in one: what happens to more
    strays than a batch is the next test.)"""
    with without_current_partition(cluster, "strays") as (admin, table):
        claimed, failures, stop = {}, [], threading.Event()
        guard = threading.Lock()
        # Every stray moved is locked (its key lock) until the move commits:
        # the batch must fit in the lock table, the claims are paced to fit
        # in the batch (at most 4 x 100 a second, and 3000 a batch).
        set_batch_size(admin, 3000)

        def claimer(n):
            rng = random.Random(n)
            with cluster.connect("strays") as conn:
                i = 0
                while not stop.is_set():
                    i += 1
                    key = f"k{n}-{i}" if rng.random() < 0.7 or i < 3 else f"k{n}-{rng.randint(1, i - 1)}"
                    try:
                        outcome, _ = claim(conn, "strays", key)
                    except Exception as exc:
                        failures.append(f"{key}: {exc!r}")
                        continue
                    if outcome == "claimed":
                        with guard:
                            claimed[key] = claimed.get(key, 0) + 1
                    time.sleep(0.01)

        try:
            with ThreadPoolExecutor(4) as pool:
                futures = [pool.submit(claimer, n) for n in range(4)]
                try:
                    time.sleep(1)  # keys pile up in the default partition
                    in_default = admin.execute("SELECT count(*) FROM webhook_dedup.keys_default").fetchone()[0]
                    runs = []

                    def made_again():
                        runs.append(admin.execute(
                            "SELECT partitions_created, errors FROM webhook_dedup.run_maintenance()").fetchone())
                        return runs[-1][0] == 1 and current_partition(admin)

                    made = wait_for("the current partition made again", made_again, 20, every_s=0.3,
                                    detail=lambda: runs[-3:])
                    time.sleep(1)
                finally:
                    stop.set()
                for f in futures:
                    f.result()
        finally:
            set_batch_size(admin, None)
        assert in_default > 0
        assert made == (table,), runs
        assert not failures, failures[:5]
        assert not [k for k, n in claimed.items() if n > 1], "a key was claimed twice"
        assert admin.execute("SELECT count(*) FROM webhook_dedup.keys_default").fetchone()[0] == 0
        stored = admin.execute("SELECT count(*), count(DISTINCT idem_key) FROM webhook_dedup.keys"
                               " WHERE source = 'strays'").fetchone()
        assert stored == (len(claimed), len(claimed)), "every claimed key stored once"
    assert "keys from the default partition into " + table in cluster.log_text()


def test_more_strays_than_a_batch_stay_in_the_default_partition(cluster):
    with without_current_partition(cluster, "strays2") as (admin, table):
        admin.execute("SELECT webhook_claim('s2', 'k' || i) FROM generate_series(1, 30) i")
        try:
            set_batch_size(admin, 10)
            created, errors = admin.execute(
                "SELECT partitions_created, errors FROM webhook_dedup.run_maintenance()").fetchone()
        finally:
            set_batch_size(admin, None)
        assert created == 0
        assert len(errors) == 1 and "more than 10 keys (webhook_dedup.batch_size) wait in the default" in errors[0]
        assert admin.execute("SELECT count(*) FROM webhook_dedup.keys_default").fetchone()[0] == 30
        assert admin.execute("SELECT outcome FROM webhook_claim('s2', 'k7')").fetchone()[0] == "in_progress"
