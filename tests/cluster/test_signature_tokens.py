"""A Mailgun signature block copied onto other content.

Mailgun signs `timestamp + token`, not the body
(https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks),
so a signature block taken from one genuine request verifies on any other
`event-data` for the whole window: 0.2.0 as first landed claimed such a
forgery as a new event (verified = true, outcome = claimed). Now each
token is bound to the bytes it first arrived with
(webhook_dedup.signature_tokens): the same token with the same bytes is an
ordinary duplicate, with other bytes it is refused (verified = false,
reject_reason = token_reused, counted as rejected_token_reused) and nothing
else is written; of concurrent first uses with different bodies exactly one
wins; maintenance prunes the tokens. Every signature here is computed with
Python's hmac, outside the extension. On a cluster of its own (the counters
are in shared memory).
"""

import hashlib
import hmac
import json
import threading
import time

import psycopg
import pytest

from edition import write_waiting_counts
from own_cluster import OwnCluster

KEY = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0"
SOURCE = "mg"


@pytest.fixture(scope="module")
def cluster():
    c = OwnCluster({"webhook_dedup.maintenance_interval": "0"})
    try:
        with c.connect() as conn:
            conn.execute("CREATE EXTENSION webhook_dedup")
            conn.execute("INSERT INTO webhook_dedup.sources (source, provider) VALUES (%s, 'mailgun')", (SOURCE,))
            conn.execute("SELECT webhook_dedup.add_secret(%s, %s, now() - interval '1 day')", (SOURCE, KEY))
        yield c
    finally:
        c.destroy()


def signature_block(token: str, timestamp: int) -> dict:
    """Mailgun's signature member: HMAC-SHA256 of "{timestamp}{token}" under
    the signing key, hex (the rule of mailgun-php's Webhook::verifyWebhook)."""
    mac = hmac.new(KEY.encode(), f"{timestamp}{token}".encode(), hashlib.sha256).hexdigest()
    return {"timestamp": str(timestamp), "token": token, "signature": mac}


def body(block: dict, event_id: str, event: str = "delivered", recipient: str = "alice@example.com") -> bytes:
    return json.dumps({"signature": block,
                       "event-data": {"id": event_id, "event": event, "recipient": recipient,
                                      "timestamp": block["timestamp"] + ".5"}}).encode()


def receive(conn, payload: bytes):
    return conn.execute(
        "SELECT verified, reject_reason, outcome, idem_key FROM webhook_dedup.webhook_receive("
        "'mailgun', %s, '{}', source => %s)", (payload, SOURCE)).fetchone()


def table_rows(conn):
    """Every row the extension keeps for the source, table by table."""
    return {t: conn.execute(f"SELECT count(*) FROM webhook_dedup.{t} WHERE source = %s", (SOURCE,)).fetchone()[0]
            for t in ("keys", "payloads", "replay_guards", "conflict_log", "signature_tokens")}


def test_a_copied_signature_block_is_refused_and_writes_nothing(cluster):
    now = int(time.time())
    block = signature_block("5egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6", now)
    genuine = body(block, "evt-genuine")
    forged = body(block, "evt-forged", event="unsubscribed", recipient="bob@example.com")
    with cluster.connect() as conn:
        # both verify as signatures: the body is not signed
        for payload in (genuine, forged):
            assert conn.execute("SELECT webhook_dedup.webhook_verify('mailgun', %s, '{}', ARRAY[%s])",
                                (payload, KEY)).fetchone()[0] is True
        assert receive(conn, genuine) == (True, None, "claimed", f"{SOURCE}:evt-genuine")
        before = table_rows(conn)
        assert before["signature_tokens"] == 1
        assert receive(conn, forged) == (False, "token_reused", None, None)
        assert table_rows(conn) == before, "the refused delivery wrote nothing"
        # the same bytes again: an ordinary duplicate of the first event
        assert receive(conn, genuine) == (True, None, "in_progress", f"{SOURCE}:evt-genuine")
        # Mailgun's retry of the event is signed anew (a new token): a duplicate
        retry = body(signature_block("retrytoken0000000000000000000000000000000000000001", now + 1), "evt-genuine")
        outcome = receive(conn, retry)
        assert outcome[:2] == (True, None) and outcome[2] in ("in_progress", "conflict"), outcome
        write_waiting_counts(conn)


def test_concurrent_first_uses_of_one_token_exactly_one_wins(cluster):
    now = int(time.time())
    block = signature_block("racetoken00000000000000000000000000000000000000000", now)
    bodies = [body(block, f"evt-race-{i}") for i in range(8)]
    answers = [None] * len(bodies)
    barrier = threading.Barrier(len(bodies))

    def deliver(i):
        with cluster.connect() as conn:
            barrier.wait()
            answers[i] = receive(conn, bodies[i])
            write_waiting_counts(conn)

    threads = [threading.Thread(target=deliver, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claimed = [a for a in answers if a[0]]
    refused = [a for a in answers if not a[0]]
    assert len(claimed) == 1 and claimed[0][2] == "claimed", answers
    assert all(a[1] == "token_reused" for a in refused) and len(refused) == len(bodies) - 1, answers
    with cluster.connect() as conn:
        keys = conn.execute("SELECT idem_key FROM webhook_dedup.keys WHERE source = %s AND idem_key LIKE %s",
                            (SOURCE, f"{SOURCE}:evt-race-%")).fetchall()
        assert keys == [(claimed[0][3],)]


def test_the_refusals_are_counted(cluster):  # runs before the aged-signature test, which counts too
    with cluster.connect() as conn:
        row = conn.execute("SELECT sum(rejected_token_reused), sum(signature_rejections)"
                           "  FROM webhook_dedup.duplicate_metrics WHERE source = %s", (SOURCE,)).fetchone()
        # one in the first test, seven in the race
        assert row == (8, 8)
        conn.execute("SELECT webhook_dedup.flush_metrics()")
        assert conn.execute("SELECT sum(rejected_token_reused) FROM webhook_dedup.claim_counts"
                            " WHERE source = %s AND bucket_width = '1 hour'", (SOURCE,)).fetchone()[0] == 8


def test_maintenance_prunes_tokens_past_retention_and_window(cluster):
    now = int(time.time())
    with cluster.connect() as conn:
        conn.execute("UPDATE webhook_dedup.sources SET retention = '1 hour' WHERE source = %s", (SOURCE,))
        for i, token in enumerate(("oldtoken" + "0" * 42, "opentoken" + "0" * 41)):
            assert receive(conn, body(signature_block(token, now), f"evt-prune-{i}"))[0]
        # the first: seen and signed long ago; the second: seen long ago but
        # its window still open (a wide tolerance), so it must stay
        conn.execute("""UPDATE webhook_dedup.signature_tokens
                           SET seen_at = now() - interval '2 hours', signed_at = now() - interval '2 hours',
                               window_until = CASE WHEN token_sha256 = sha256(%s::bytea)
                                                   THEN now() - interval '1 hour' ELSE now() + interval '1 hour' END
                         WHERE source = %s AND token_sha256 IN (sha256(%s::bytea), sha256(%s::bytea))""",
                     (b"oldtoken" + b"0" * 42, SOURCE, b"oldtoken" + b"0" * 42, b"opentoken" + b"0" * 41))
        pruned = conn.execute("SELECT history_pruned FROM webhook_dedup.run_maintenance()").fetchone()[0]
        assert pruned >= 1
        left = conn.execute("SELECT token_sha256 = sha256(%s::bytea) FROM webhook_dedup.signature_tokens"
                            " WHERE source = %s AND seen_at < now() - interval '1 hour'",
                            (b"opentoken" + b"0" * 41, SOURCE)).fetchall()
        assert left == [(True,)], "the token whose window is still open stays"


def test_a_signature_older_than_what_is_remembered_is_refused(cluster):
    """A token is remembered while its signed time is within the source's
    retention; a wider tolerance must not let an older signature verify,
    whose token may have been pruned."""
    now = int(time.time())
    with cluster.connect() as conn:
        conn.execute("UPDATE webhook_dedup.sources SET retention = '1 hour' WHERE source = %s", (SOURCE,))
        old = body(signature_block("agedtoken" + "0" * 41, now - 5400), "evt-aged")
        row = conn.execute("SELECT verified, reject_reason FROM webhook_dedup.webhook_receive('mailgun', %s, '{}',"
                           " source => %s, tolerance => '2 hours')", (old, SOURCE)).fetchone()
        assert row == (False, "timestamp_too_old")
        fresh = body(signature_block("freshtoken" + "0" * 40, now - 1800), "evt-fresh")
        row = conn.execute("SELECT verified, outcome FROM webhook_dedup.webhook_receive('mailgun', %s, '{}',"
                           " source => %s, tolerance => '2 hours')", (fresh, SOURCE)).fetchone()
        assert row == (True, "claimed")
        assert conn.execute("SELECT count(*) FROM webhook_dedup.keys WHERE idem_key = %s",
                            (f"{SOURCE}:evt-aged",)).fetchone()[0] == 0


def test_a_token_bound_in_an_open_transaction_is_waited_for_at_most_the_wait(cluster):
    """The bind of a signed token waits for another copy binding the same
    token in a transaction still open. It is bounded by the wait as the
    rest of the call: the copy answers in_progress (503) by the deadline,
    and writes nothing."""
    block = signature_block("tok-open-transaction", int(time.time()))
    payload = body(block, "evt-open")
    with cluster.connect() as holder, cluster.connect() as copy:
        holder.execute("BEGIN")
        assert receive(holder, payload)[2] == "claimed"
        started = time.monotonic()
        row = copy.execute(
            "SELECT outcome, http_status FROM webhook_dedup.webhook_receive('mailgun', %s, '{}', source => %s,"
            " wait => '1 second')", (payload, SOURCE)).fetchone()
        elapsed = time.monotonic() - started
        assert row == ("in_progress", 503)
        assert 1.0 <= elapsed < 2.5, elapsed
        holder.execute("ROLLBACK")
        assert copy.execute("SELECT count(*) FROM webhook_dedup.signature_tokens WHERE source = %s"
                            " AND token_sha256 = sha256(%s::bytea)",
                            (SOURCE, block["token"].encode())).fetchone()[0] == 0
