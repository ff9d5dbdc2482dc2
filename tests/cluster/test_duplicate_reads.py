"""A recent duplicate is a read: no transaction id, no WAL, no write to its
key; every other delivery of a known key is written as before.

Real connections, because what is proved is about a transaction of its own:
whether the call assigned it a transaction id
(pg_current_xact_id_if_assigned), what its key row shows after it
committed, and what another session sees. The rule itself
(crates/webhook-dedup-core/src/claim.rs records_touch) has its unit test; the setting is
webhook_dedup.duplicate_record_interval (60 s by default, superuser-only).
"""

import hashlib
import hmac
import json
import time
import uuid

import psycopg
import pytest

from edition import native_only


def one(conn, sql, params=()):
    return conn.execute(sql, params).fetchone()[0]


def row(conn, source, key):
    return conn.execute("SELECT deliveries, last_seen_at, state FROM webhook_dedup.keys"
                        " WHERE source = %s AND idem_key = %s", (source, key)).fetchone()


def claim_in_transaction(conn, source, key, payload=None, isolation="read committed"):
    """(outcome, result, whether the claim's transaction got a transaction id)."""
    with conn.transaction():
        conn.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
        outcome, result = conn.execute(
            "SELECT outcome, result FROM webhook_dedup.webhook_claim(%s, %s, %s::bytea)",
            (source, key, payload)).fetchone()
        xid = one(conn, "SELECT pg_current_xact_id_if_assigned()")
    return outcome, result, xid is not None


@pytest.fixture
def source():
    return f"reads-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def completed(connect, source):
    """A key claimed and completed by another session, with a result."""
    with connect() as conn:
        token = one(conn, "SELECT claim_token FROM webhook_dedup.webhook_claim(%s, 'k', 'a'::bytea)", (source,))
        conn.execute("SELECT webhook_dedup.webhook_complete(%s, 'k', %s, '{\"status\": 201}')", (source, token))
    return "k"


def test_a_duplicate_of_a_completed_key_takes_no_transaction_id_and_writes_nothing(connect, source, completed):
    with connect() as conn:
        before = row(conn, source, completed)
        for _ in range(5):
            outcome, result, wrote = claim_in_transaction(conn, source, completed, b"a")
            assert (outcome, result, wrote) == ("duplicate", {"status": 201}, False)
        assert row(conn, source, completed) == before
        # the per-source counters count every one
        assert one(conn, "SELECT sum(duplicates_of_completed) FROM webhook_dedup.duplicate_metrics"
                         " WHERE source = %s", (source,)) == 5


def test_a_duplicate_of_a_held_key_is_a_read_too(connect, source):
    with connect() as conn:
        conn.execute("SELECT webhook_dedup.webhook_claim(%s, 'held', lease => '1 hour')", (source,))
        before = row(conn, source, "held")
        outcome, _, wrote = claim_in_transaction(conn, source, "held")
        assert (outcome, wrote) == ("in_progress", False)
        assert row(conn, source, "held") == before


def test_what_must_be_recorded_still_is(connect, source, completed):
    with connect() as conn:
        deliveries = row(conn, source, completed)[0]
        # a conflicting payload: recorded (conflict_log, the key's counts)
        outcome, result, wrote = claim_in_transaction(conn, source, completed, b"other")
        assert (outcome, result, wrote) == ("conflict", None, True)
        assert row(conn, source, completed)[0] == deliveries + 1
        # under REPEATABLE READ: the locked read, written
        outcome, _, wrote = claim_in_transaction(conn, source, completed, b"a", "repeatable read")
        assert (outcome, wrote) == ("duplicate", True)
        assert row(conn, source, completed)[0] == deliveries + 2
        # a key without a fingerprint adopts the first one given: written
        conn.execute("SELECT webhook_dedup.webhook_claim(%s, 'bare')", (source,))
        outcome, _, wrote = claim_in_transaction(conn, source, "bare", b"x")
        assert (outcome, wrote) == ("in_progress", True)
        assert one(conn, "SELECT fingerprint IS NOT NULL FROM webhook_dedup.keys"
                         " WHERE source = %s AND idem_key = 'bare'", (source,))
        # an expired lease: reclaimed, written
        conn.execute("SELECT webhook_dedup.webhook_claim(%s, 'lapsed', lease => '1 millisecond')", (source,))
        time.sleep(0.01)
        outcome, _, wrote = claim_in_transaction(conn, source, "lapsed")
        assert (outcome, wrote) == ("reclaimed", True)


def test_a_duplicate_past_the_interval_is_recorded_and_restarts_retention(connect, source, completed):
    with connect() as conn:
        conn.execute("SET webhook_dedup.duplicate_record_interval = '1s'")
        deliveries, last_seen_at, _ = row(conn, source, completed)
        time.sleep(1.1)
        outcome, _, wrote = claim_in_transaction(conn, source, completed, b"a")
        assert (outcome, wrote) == ("duplicate", True)
        deliveries_after, last_seen_after, _ = row(conn, source, completed)
        assert deliveries_after == deliveries + 1 and last_seen_after > last_seen_at
        # and the next one within the second is a read again
        outcome, _, wrote = claim_in_transaction(conn, source, completed, b"a")
        assert (outcome, wrote) == ("duplicate", False)
        # 0: every duplicate recorded, as 0.2.0 did
        conn.execute("SET webhook_dedup.duplicate_record_interval = 0")
        outcome, _, wrote = claim_in_transaction(conn, source, completed, b"a")
        assert (outcome, wrote) == ("duplicate", True)
        assert row(conn, source, completed)[0] == deliveries + 2


def test_webhook_receive_answers_a_recent_duplicate_with_a_read(connect, source):
    body = b'{"zen": "Keep it logically awesome."}'
    signature = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    headers = json.dumps({"x-github-delivery": "d-1", "x-github-event": "ping", "x-hub-signature-256": signature})
    call = ("SELECT outcome, claim_token, idem_key FROM webhook_dedup.webhook_receive('github', %s, %s::jsonb,"
            " ARRAY['s3cret'], source => %s)")
    with connect() as conn:
        outcome, token, key = conn.execute(call, (body, headers, source)).fetchone()
        assert outcome == "claimed"
        conn.execute("SELECT webhook_dedup.webhook_complete(%s, %s, %s)", (source, key, token))
        before = row(conn, source, key)
        with conn.transaction():
            assert conn.execute(call, (body, headers, source)).fetchone()[0] == "duplicate"
            assert one(conn, "SELECT pg_current_xact_id_if_assigned()") is None
        assert row(conn, source, key) == before


def test_a_replayed_body_of_a_decided_owner_is_a_read(connect, source):
    """The same signed body under a new delivery id (a replay): answered as
    the key it first came with, without a lock on the guard, a transaction
    id or a write; a body its delivery may take over (the owner failed,
    nothing retries it) still locks the guard and takes it over."""
    body = b'{"zen": "Design for failure."}'

    def headers(delivery, signed=body):
        signature = "sha256=" + hmac.new(b"s3cret", signed, hashlib.sha256).hexdigest()
        return json.dumps({"x-github-delivery": delivery, "x-github-event": "ping", "x-hub-signature-256": signature})
    call = ("SELECT outcome, claim_token, idem_key, result FROM webhook_dedup.webhook_receive('github', %s, %s::jsonb,"
            " ARRAY['s3cret'], source => %s)")
    guard = ("SELECT idem_key, xmin::text, xmax::text FROM webhook_dedup.replay_guards"
             " WHERE source = %s")
    with connect() as conn:
        outcome, token, owner, _ = conn.execute(call, (body, headers("d-1"), source)).fetchone()
        assert outcome == "claimed"
        conn.execute("SELECT webhook_dedup.webhook_complete(%s, %s, %s, '{\"status\": 200}')", (source, owner, token))
        before = conn.execute(guard, (source,)).fetchall()
        with conn.transaction():
            outcome, _, key, result = conn.execute(call, (body, headers("d-2"), source)).fetchone()
            assert (outcome, key, result) == ("duplicate", owner, {"status": 200})
            assert one(conn, "SELECT pg_current_xact_id_if_assigned()") is None
        assert conn.execute(guard, (source,)).fetchall() == before
        assert one(conn, "SELECT count(*) FROM webhook_dedup.keys WHERE source = %s", (source,)) == 1

        # the owner fails for good: a replay takes the body over, with the lock
        other, failing = f"{source}-f", body + b" "
        outcome, token, owner, _ = conn.execute(call, (failing, headers("d-3", failing), other)).fetchone()
        assert outcome == "claimed"
        assert one(conn, "SELECT webhook_dedup.webhook_fail(%s, %s, %s, 'boom')", (other, owner, token)) == "failed"
        with conn.transaction():
            outcome, _, key, _ = conn.execute(call, (failing, headers("d-4", failing), other)).fetchone()
            assert (outcome, key != owner) == ("claimed", True)
            assert one(conn, "SELECT pg_current_xact_id_if_assigned()") is not None


def test_a_recent_duplicate_received_in_enqueue_mode_is_a_read(connect, source):
    """webhook_receive in enqueue mode with the replay guard (github): a
    duplicate of a stored key whose body this is takes no transaction id
    and leaves the key and the guard as they were."""
    body = b'{"zen": "Practicality beats purity."}'
    signature = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    headers = json.dumps({"x-github-delivery": "e-1", "x-github-event": "ping", "x-hub-signature-256": signature})
    call = ("SELECT outcome, idem_key FROM webhook_dedup.webhook_receive('github', %s, %s::jsonb,"
            " ARRAY['s3cret'], source => %s, mode => 'enqueue')")
    guard = "SELECT idem_key, xmin::text, xmax::text FROM webhook_dedup.replay_guards WHERE source = %s"
    with connect() as conn:
        outcome, key = conn.execute(call, (body, headers, source)).fetchone()
        assert outcome == "accepted"
        before, guarded = row(conn, source, key), conn.execute(guard, (source,)).fetchall()
        with conn.transaction():
            assert conn.execute(call, (body, headers, source)).fetchone() == ("duplicate", key)
            assert one(conn, "SELECT pg_current_xact_id_if_assigned()") is None
        assert row(conn, source, key) == before
        assert conn.execute(guard, (source,)).fetchall() == guarded


@native_only("settings")
def test_a_receiver_cannot_change_the_interval(connect):
    with connect() as conn:
        conn.execute("DROP ROLE IF EXISTS reads_receiver")
        conn.execute("CREATE ROLE reads_receiver LOGIN IN ROLE webhook_dedup_receiver")
    try:
        with psycopg.connect("", user="reads_receiver", autocommit=True) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SET webhook_dedup.duplicate_record_interval = 0")
    finally:
        with connect() as conn:
            conn.execute("DROP ROLE reads_receiver")


def test_a_read_only_transaction_still_refuses_a_claim(connect, source, completed):
    """The read is how a claim answers a recent duplicate, not a way to claim
    where writes are refused: 25006 as before, whatever the key's state."""
    with connect() as conn:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            with conn.transaction():
                conn.execute("SET TRANSACTION READ ONLY")
                conn.execute("SELECT webhook_dedup.webhook_claim(%s, %s, 'a'::bytea)", (source, completed))


def test_a_recent_duplicate_enqueue_is_a_read(connect, source):
    with connect() as conn:
        assert one(conn, "SELECT webhook_dedup.webhook_enqueue(%s, 'q', 'body'::bytea)", (source,)) == "accepted"
        before = row(conn, source, "q")
        with conn.transaction():
            assert one(conn, "SELECT webhook_dedup.webhook_enqueue(%s, 'q', 'body'::bytea)", (source,)) == "duplicate"
            assert one(conn, "SELECT pg_current_xact_id_if_assigned()") is None
        assert row(conn, source, "q") == before
        # another body: a conflict, recorded
        with conn.transaction():
            assert one(conn, "SELECT webhook_dedup.webhook_enqueue(%s, 'q', 'other'::bytea)", (source,)) == "conflict"
            assert one(conn, "SELECT pg_current_xact_id_if_assigned()") is not None
        assert row(conn, source, "q")[0] == before[0] + 1
