"""Many connections claim the same keys at once (the claim issue's stress test).

32 connections each claim the same 1,000 keys, in their own random order;
every winner completes. Exactly one claim per key may win, every completion
by a winner must succeed, and every other claim must see the key in progress
or completed. Bounded: 32,000 claims.
"""

import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from edition import EDITION, write_waiting_counts

CONNECTIONS = 32
KEYS = 1_000
SOURCE = "stress"


@pytest.mark.parametrize("direct_writes", ["on", "off"])
def test_32_connections_claim_the_same_1000_keys(connect, direct_writes):
    """Once with new keys stored by src/store/direct_writes/, once through SQL."""
    source = f"{SOURCE}-{direct_writes}"
    keys = [f"evt_{i:04d}" for i in range(KEYS)]
    barrier = threading.Barrier(CONNECTIONS)

    def worker(seed):
        order = keys[:]
        random.Random(seed).shuffle(order)
        outcomes, completions = Counter(), Counter()
        with connect() as conn:
            conn.execute("SELECT set_config('webhook_dedup.direct_writes', %s, false)", (direct_writes,))
            barrier.wait()
            for key in order:
                outcome, token = conn.execute(
                    "SELECT outcome, claim_token FROM webhook_dedup.webhook_claim(%s, %s, lease => '5 minutes')",
                    (source, key)).fetchone()
                outcomes[outcome] += 1
                if outcome == "claimed":
                    done = conn.execute("SELECT webhook_dedup.webhook_complete(%s, %s, %s, '{\"ok\": true}')",
                                        (source, key, token)).fetchone()[0]
                    completions[done] += 1
            write_waiting_counts(conn)
        return outcomes, completions

    with ThreadPoolExecutor(CONNECTIONS) as pool:
        results = list(pool.map(worker, range(CONNECTIONS)))
    outcomes = sum((o for o, _ in results), Counter())
    completions = sum((c for _, c in results), Counter())

    assert outcomes["claimed"] == KEYS, outcomes
    assert completions == Counter({True: KEYS}), "every winner completes, none twice"
    assert set(outcomes) <= {"claimed", "in_progress", "duplicate"}, outcomes
    assert sum(outcomes.values()) == CONNECTIONS * KEYS
    with connect() as conn:
        rows = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE state = 'completed' AND attempt = 1),"
            "       sum(deliveries)"
            "  FROM webhook_dedup.keys WHERE source = %s", (source,)).fetchone()
        # every delivery counted once, in the per-source counters; on the
        # keys, the first of each and the duplicates that wrote (a recent
        # duplicate on the direct path is a read; through SQL every one
        # writes; the SQL edition, which has no direct path, reads it
        # whatever webhook_dedup.direct_writes says)
        counted = conn.execute("SELECT sum(deliveries) FROM webhook_dedup.duplicate_metrics WHERE source = %s",
                               (source,)).fetchone()[0]
    assert rows[:2] == (KEYS, KEYS)
    assert counted == CONNECTIONS * KEYS
    if direct_writes == "off" and EDITION == "native":
        assert rows[2] == CONNECTIONS * KEYS
    else:
        assert KEYS <= rows[2] < CONNECTIONS * KEYS


def test_one_transaction_claims_100000_keys(connect):
    """A backfill claims 100,000 keys in one transaction: each key holds a
    row lock, not an entry of the shared lock table (which holds 6,400 by
    default), so nothing runs out; the claims are visible once it commits."""
    with connect() as conn:
        conn.autocommit = False
        rows = conn.execute("SELECT count(*) FILTER (WHERE outcome = 'claimed') FROM webhook_dedup.webhook_claim_many("
                            "'bulk', ARRAY(SELECT 'k' || i FROM generate_series(1, 100000) i))").fetchone()[0]
        assert rows == 100_000
        conn.commit()
        conn.autocommit = True
        assert conn.execute("SELECT count(*) FROM webhook_dedup.keys WHERE source = 'bulk'"
                            " AND state = 'processing'").fetchone()[0] == 100_000
        assert conn.execute("SELECT outcome FROM webhook_dedup.webhook_claim('bulk', 'k77777')").fetchone()[0] == "in_progress"
        # leased and never completed: not left for the layers after this one
        conn.execute("DELETE FROM webhook_dedup.keys WHERE source = 'bulk'")
