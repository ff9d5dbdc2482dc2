"""Without shared_preload_libraries everything but the worker and the
counters works (the worker issue's promise): on a cluster of its own that
does not preload the library, a session loads it by itself at CREATE
EXTENSION, and claims, completions, the queue, maintenance by hand and every
view work; the metrics views are empty, and webhook_dedup.database (a
server-start setting only the worker reads) is simply not defined.
"""

import hashlib
import hmac
import threading
import time

import pytest
from psycopg.types.json import Jsonb

from edition import native_only
from own_cluster import OwnCluster

pytestmark = native_only("library")


@pytest.fixture(scope="module")
def cluster():
    c = OwnCluster({"shared_preload_libraries": "''"})
    try:
        yield c
    finally:
        c.destroy()


def test_everything_but_the_worker_and_the_counters_works(cluster):
    with cluster.connect() as conn:
        conn.execute("CREATE EXTENSION webhook_dedup")
        assert conn.execute("SELECT count(*) FROM pg_stat_activity"
                            " WHERE backend_type = 'webhook_dedup maintenance'").fetchone() == (0,)
        outcome, token = conn.execute("SELECT outcome, claim_token FROM webhook_dedup.webhook_claim('np', 'k1')").fetchone()
        assert outcome == "claimed"
        assert conn.execute("SELECT webhook_dedup.webhook_complete('np', 'k1', %s)", (token,)).fetchone() == (True,)
        assert conn.execute("SELECT outcome FROM webhook_dedup.webhook_claim('np', 'k1')").fetchone() == ("duplicate",)
        assert conn.execute("SELECT webhook_dedup.webhook_enqueue('np', 'q1', '\\x01'::bytea)").fetchone() == ("accepted",)
        assert conn.execute("SELECT idem_key FROM webhook_dedup.webhook_next('np')").fetchone() == ("q1",)
        ran, errors = conn.execute("SELECT ran, errors FROM webhook_dedup.run_maintenance()").fetchone()
        assert ran and errors == []
        assert conn.execute("SELECT webhook_dedup.flush_metrics()").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM webhook_dedup.duplicate_metrics").fetchone() == (0,)
        assert conn.execute("SELECT deliveries FROM webhook_dedup.key_history"
                            " WHERE idem_key = 'k1'").fetchone() == (2,)
        assert conn.execute("SELECT state, keys FROM webhook_dedup.key_states WHERE source = 'np'").fetchall() == [
            ("processing", 1)]
        assert conn.execute("SELECT current_setting('webhook_dedup.database', true)").fetchone() == (None,)
        assert conn.execute("SHOW webhook_dedup.retention").fetchone() == ("30d",)
    # a new session loads the library again (no FATAL for a server-start setting)
    with cluster.connect() as conn:
        assert conn.execute("SELECT outcome FROM webhook_dedup.webhook_claim('np', 'k2')").fetchone() == ("claimed",)


def test_the_bounded_wait_polls_without_shared_memory(cluster):
    """Without the condition variables (src/wait.rs) an in-flight
    duplicate's wait still ends soon after the holder completes: it looks
    again every 100 ms at most."""
    body = b'{"event_id":"Ev-wait","type":"event_callback","event":{"type":"app_mention"},"event_time":1}'
    ts = "1700000000"
    sig = "v0=" + hmac.new(b"s", f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    headers = Jsonb({"x-slack-request-timestamp": ts, "x-slack-signature": sig})
    sql = ("SELECT outcome, claim_token, idem_key, http_status, response FROM webhook_dedup.webhook_receive("
           "'slack', %s, %s, ARRAY['s'], at => to_timestamp(1700000000), wait => %s::interval)")
    with cluster.connect() as holder, cluster.connect() as waiter:
        outcome, token, key, _, _ = holder.execute(sql, (body, headers, "0")).fetchone()
        assert outcome == "claimed"
        got = {}

        def wait():
            started = time.monotonic()
            got["row"] = waiter.execute(sql, (body, headers, "10 seconds")).fetchone()
            got["elapsed"] = time.monotonic() - started

        t = threading.Thread(target=wait)
        t.start()
        time.sleep(0.5)
        assert holder.execute("SELECT webhook_dedup.webhook_complete('slack', %s, %s, '{\"ok\":1}')",
                              (key, token)).fetchone() == (True,)
        t.join(15)
        assert got["row"][0] == "duplicate" and got["row"][3:] == (200, {"ok": 1})
        assert got["elapsed"] < 5, got["elapsed"]
