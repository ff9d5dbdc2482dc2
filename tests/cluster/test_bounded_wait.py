"""The bounded wait of an in-flight duplicate (webhook_receive's `wait`),
on the test cluster (the library preloaded: the waiters sleep on condition
variables in shared memory, src/wait.rs).

Senders retry at once while the first attempt still runs (Slack after its
3 s deadline), so a duplicate often finds its key `in_progress`. Instead of
answering at once with a 503, webhook_receive waits for the holder, at most
`wait`: a holder that completes in time turns the answer into the
duplicate's 200 with the stored result; otherwise 503 with Retry-After.
The wait holds no lock (the holder's completion never waits for a waiter),
ends at the holder's commit, at the lease's expiry (then it reclaims), on a
cancel or statement_timeout, and not at all for a row the caller's own
transaction wrote. GitHub deliveries signed here with Python's hmac.
"""

import hashlib
import hmac
import json
import threading
import time
import uuid

import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from edition import EDITION

SECRET = "wait-secret"
SOURCE = "github_wait"


def delivery(event_id: str, body: bytes = None):
    # GitHub's replay guard answers a body already received under another
    # event id from that key: each event gets a body of its own.
    body = body or json.dumps({"action": "opened", "event": event_id}).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {"x-github-delivery": event_id, "x-github-event": "issues", "x-hub-signature-256": signature}
    return body, headers


def receive(conn, event_id, wait=None, body=None, lease="30 seconds"):
    payload, headers = delivery(event_id, body)
    return conn.cursor(row_factory=dict_row).execute(
        "SELECT * FROM webhook_dedup.webhook_receive('github', %s, %s, ARRAY[%s], source => %s,"
        " lease => %s::interval, wait => %s::interval)",
        (payload, Jsonb(headers), SECRET, SOURCE, lease, wait),
    ).fetchone()


def complete(conn, row, result):
    return conn.execute(
        "SELECT webhook_dedup.webhook_complete(%s, %s, %s, %s)",
        (SOURCE, row["idem_key"], row["claim_token"], Jsonb(result)),
    ).fetchone()[0]


def new_id():
    return str(uuid.uuid4())


class Waiter(threading.Thread):
    """A webhook_receive call in a thread of its own, timed."""

    def __init__(self, connect, event_id, wait, **kwargs):
        super().__init__(daemon=True)
        self.conn = connect()
        self.pid = self.conn.info.backend_pid
        self.args = (event_id, wait)
        self.kwargs = kwargs
        self.row = self.error = None
        self.elapsed = None

    def run(self):
        started = time.monotonic()
        try:
            self.row = receive(self.conn, *self.args, **self.kwargs)
        except psycopg.Error as exc:
            self.error = exc
        finally:
            self.elapsed = time.monotonic() - started
            self.conn.close()


# The extension's wait as pg_stat_activity shows it: the native edition's
# condition variable, the SQL edition's pg_sleep between its looks
# (docs/sql-edition.md, "Differences")
SLEEPING = ("wait_event_type = 'Timeout' AND wait_event = 'PgSleep'" if EDITION == "sql"
            else "wait_event_type = 'Extension'")


def wait_until_waiting(conn, pids, timeout=10):
    """Until every backend in pids sleeps in the extension's wait."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        waiting = conn.execute(
            f"SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s) AND {SLEEPING}",
            (list(pids),),
        ).fetchone()[0]
        if waiting == len(pids):
            return
        time.sleep(0.02)
    pytest.fail(f"the waiters {pids} never slept in the extension's wait")


def test_a_holder_that_completes_in_time_turns_the_answer_into_the_duplicates_200(connect):
    event = new_id()
    with connect() as holder_conn, connect() as observer:
        first = receive(holder_conn, event, wait="0")
        assert (first["outcome"], first["http_status"]) == ("claimed", 200)
        waiters = [Waiter(connect, event, "8 seconds") for _ in range(5)]
        for w in waiters:
            w.start()
        wait_until_waiting(observer, [w.pid for w in waiters])
        # While they sleep, none holds a lock on a key or a transaction id:
        # the holder's completion cannot wait for them.
        held = observer.execute(
            "SELECT count(*) FROM pg_locks WHERE pid = ANY(%s) AND locktype IN ('transactionid', 'tuple', 'advisory')",
            ([w.pid for w in waiters],),
        ).fetchone()[0]
        assert held == 0
        assert observer.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s) AND backend_xid IS NOT NULL",
            ([w.pid for w in waiters],),
        ).fetchone()[0] == 0
        started = time.monotonic()
        assert complete(holder_conn, first, {"done": 1})
        assert time.monotonic() - started < 2, "the holder's completion waited"
        for w in waiters:
            w.join(10)
        for w in waiters:
            assert w.error is None, w.error
            row = w.row
            assert (row["outcome"], row["http_status"], row["response"]) == ("duplicate", 200, {"done": 1})
            assert row["http_headers"] == {"Content-Type": "application/json"}
            # woken by the commit, long before the 8 s wait ended
            assert w.elapsed < 6, w.elapsed


def test_a_holder_that_does_not_complete_gets_503_with_retry_after(connect):
    event = new_id()
    with connect() as holder_conn:
        first = receive(holder_conn, event, wait="0", lease="60 seconds")
        assert first["outcome"] == "claimed"
        w = Waiter(connect, event, "1 second")
        w.start()
        w.join(10)
        assert w.error is None, w.error
        row = w.row
        assert (row["outcome"], row["http_status"]) == ("in_progress", 503)
        assert w.elapsed >= 1.0, "waited the whole second"
        retry_after = int(row["http_headers"]["Retry-After"])
        assert 50 <= retry_after <= 60, retry_after  # what is left of the holder's lease
        assert row["response"] == {"status": "in_progress"}
        # wait => 0: at once
        with connect() as other:
            started = time.monotonic()
            row = receive(other, event, wait="0")
            assert (row["outcome"], row["http_status"]) == ("in_progress", 503)
            assert time.monotonic() - started < 1


def test_a_lease_that_expires_during_the_wait_is_reclaimed(connect):
    event = new_id()
    with connect() as holder_conn:
        first = receive(holder_conn, event, wait="0", lease="1 second")
        assert first["outcome"] == "claimed"
        w = Waiter(connect, event, "5 seconds")
        w.start()
        w.join(10)
        assert w.error is None, w.error
        assert (w.row["outcome"], w.row["http_status"], w.row["attempt"]) == ("reclaimed", 200, 2)
        assert w.row["claim_token"] is not None and w.row["response"] is None
        assert w.elapsed < 4, "ended at the lease's expiry, not the wait's"
        # the first holder is fenced out
        assert complete(holder_conn, first, {"late": True}) is False


def test_a_cancel_or_statement_timeout_ends_the_wait_at_once(connect):
    event = new_id()
    with connect() as holder_conn, connect() as observer:
        assert receive(holder_conn, event, wait="0", lease="60 seconds")["outcome"] == "claimed"
        w = Waiter(connect, event, "30 seconds")
        w.start()
        wait_until_waiting(observer, [w.pid])
        started = time.monotonic()
        assert observer.execute("SELECT pg_cancel_backend(%s)", (w.pid,)).fetchone()[0]
        w.join(10)
        assert isinstance(w.error, psycopg.errors.QueryCanceled), w.error
        assert time.monotonic() - started < 2
        with connect() as timed:
            timed.execute("SET statement_timeout = '300ms'")
            started = time.monotonic()
            with pytest.raises(psycopg.errors.QueryCanceled):
                receive(timed, event, wait="30 seconds")
            assert time.monotonic() - started < 3
        # the cancelled calls wrote nothing: the wait comes before any write
        deliveries = holder_conn.execute(
            "SELECT deliveries FROM webhook_dedup.keys WHERE source = %s AND idem_key = %s",
            (SOURCE, f"{SOURCE}:{event}"),
        ).fetchone()[0]
        assert deliveries == 1


def test_no_wait_for_a_conflict_or_for_the_callers_own_row(connect):
    event = new_id()
    with connect() as holder_conn:
        assert receive(holder_conn, event, wait="0")["outcome"] == "claimed"
        started = time.monotonic()
        row = receive(connect(), event, wait="10 seconds", body=b'{"action":"edited"}')
        assert (row["outcome"], row["http_status"], row["response"]) == ("conflict", 200, {"status": "conflict"})
        assert time.monotonic() - started < 3, "a conflict does not wait"
    with connect() as conn:
        other = new_id()
        conn.execute("BEGIN")
        assert receive(conn, other, wait="0")["outcome"] == "claimed"
        started = time.monotonic()
        row = receive(conn, other, wait="10 seconds")
        assert row["outcome"] == "in_progress"
        assert time.monotonic() - started < 3, "the row is this transaction's: no holder could complete it"
        conn.execute("ROLLBACK")


def test_no_wait_where_it_cannot_help(connect):
    """Found by review: under REPEATABLE READ the claim after the wait could
    not see the holder's completion (40001, a 500 to the provider), and in
    a transaction that wrote before the call the caller may hold the key's
    row lock itself (the holder's completion would wait for the waiter).
    There the call does not wait: in_progress (503) at once."""
    event = new_id()
    with connect() as holder_conn:
        assert receive(holder_conn, event, wait="0")["outcome"] == "claimed"
        with connect() as rr:
            rr.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            rr.execute("SELECT 1 FROM webhook_dedup.keys LIMIT 1")  # the snapshot
            started = time.monotonic()
            row = receive(rr, event, wait="8 seconds")
            assert (row["outcome"], row["http_status"]) == ("in_progress", 503)
            assert time.monotonic() - started < 3
            rr.execute("ROLLBACK")
        with connect() as wrote:
            wrote.execute("BEGIN")
            wrote.execute("CREATE TEMP TABLE scratch (x int)")
            wrote.execute("INSERT INTO scratch VALUES (1)")
            started = time.monotonic()
            row = receive(wrote, event, wait="8 seconds")
            assert row["outcome"] == "in_progress"
            assert time.monotonic() - started < 3
            wrote.execute("ROLLBACK")
        # an autocommitted call does wait (and here gets the whole wait)
        started = time.monotonic()
        with connect() as plain:
            assert receive(plain, event, wait="1 second")["outcome"] == "in_progress"
        assert time.monotonic() - started >= 1


@pytest.fixture(scope="module", autouse=True)
def clean(connect):
    yield
    with connect() as conn:
        conn.execute("DELETE FROM webhook_dedup.keys WHERE source = %s", (SOURCE,))


def test_two_copies_sent_at_the_same_moment_wait_for_each_other(connect):
    """Found by review: a copy whose look came while the other copy's
    claim was still inserting the key found nothing, then met that insert
    in its own claim and answered in_progress without waiting. Now the look
    probes the primary key (which waits for the insert) and waits for the
    holder. Each pair: one claims (and completes 0.3 s later), the other
    waits and answers the duplicate."""
    pairs = 20
    outcomes = []
    for _ in range(pairs):
        event = new_id()
        barrier = threading.Barrier(2)
        got = []

        def copy():
            with connect() as conn:
                barrier.wait()
                row = receive(conn, event, wait="5 seconds")
                if row["outcome"] == "claimed":
                    time.sleep(0.3)
                    assert complete(conn, row, {"pair": event})
                got.append(row["outcome"])

        threads = [threading.Thread(target=copy) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        outcomes.append(tuple(sorted(got)))
    assert outcomes == [("claimed", "duplicate")] * pairs, outcomes


def key_row(conn, event, source=SOURCE):
    return conn.execute(
        "SELECT xmin::text, deliveries, state, last_step FROM webhook_dedup.keys WHERE source = %s AND idem_key = %s",
        (source, f"{source}:{event}"),
    ).fetchone()


def test_a_lock_held_past_the_wait_answers_503_by_the_deadline(connect):
    """A copy whose holder sits in an open transaction that changed the key
    (a checkpoint inside its step) waited for the holder's transaction, not
    `wait`: 6 s for a 2 s wait, past Slack's 3 s. Every lock wait of the
    call now ends by the wait's deadline; what it wrote is rolled back and
    it answers in_progress, 503 with Retry-After (the holder's remaining
    lease)."""
    event = new_id()
    with connect() as holder_conn, connect() as step:
        first = receive(holder_conn, event, wait="0", lease="60 seconds")
        assert first["outcome"] == "claimed"
        before = key_row(holder_conn, event)
        step.execute("BEGIN")
        assert step.execute("SELECT webhook_dedup.webhook_checkpoint(%s, %s, %s, 'charged')",
                            (SOURCE, first["idem_key"], first["claim_token"])).fetchone()[0]
        for wait in ("2 seconds", "0"):
            w = Waiter(connect, event, wait)
            w.start()
            w.join(15)
            assert w.error is None, w.error
            assert (w.row["outcome"], w.row["http_status"]) == ("in_progress", 503), w.row
            assert 50 <= int(w.row["http_headers"]["Retry-After"]) <= 60, w.row["http_headers"]
            bound = 2.0 if wait == "2 seconds" else 0.0
            assert bound <= w.elapsed < bound + 1.5, (wait, w.elapsed)
        # the copies changed nothing; the holder goes on and completes
        step.execute("COMMIT")
        after = key_row(holder_conn, event)
        assert after[1:] == (before[1], "processing", "charged")
        assert complete(holder_conn, first, {"done": True})


def test_a_first_claim_in_an_open_transaction_bounds_the_copy_too(connect):
    """The holder claimed and works in one transaction (its insert of the
    key is uncommitted): the copy's probe of the primary key and the replay
    guard's insert wait for that transaction, at most the wait. Its writes
    (the guard) are rolled back: once the holder rolls back, neither the
    key nor a guard row is left."""
    event = new_id()
    body, _ = delivery(event)
    with connect() as holder, connect() as observer:
        holder.execute("BEGIN")
        assert receive(holder, event, wait="0", lease="45 seconds")["outcome"] == "claimed"
        w = Waiter(connect, event, "1 second")
        w.start()
        w.join(15)
        assert w.error is None, w.error
        assert (w.row["outcome"], w.row["http_status"]) == ("in_progress", 503), w.row
        assert 1.0 <= w.elapsed < 2.5, w.elapsed
        # no lease to read yet: the lease this call asks for (receive's 30
        # seconds; copies from one receiver ask for the same) is the hint,
        # not the source's (the default, 5 minutes)
        assert 1 <= int(w.row["http_headers"]["Retry-After"]) <= 30, w.row["http_headers"]
        # and the source's when the call names none
        w = Waiter(connect, event, "1 second", lease=None)
        w.start()
        w.join(15)
        assert w.error is None, w.error
        assert w.row["outcome"] == "in_progress", w.row
        assert 30 < int(w.row["http_headers"]["Retry-After"]) <= 300, w.row["http_headers"]
        holder.execute("ROLLBACK")
        assert key_row(observer, event) is None
        guards = observer.execute(
            "SELECT count(*) FROM webhook_dedup.replay_guards WHERE source = %s AND body_sha256 = sha256(%s)",
            (SOURCE, body)).fetchone()[0]
        assert guards == 0


def test_an_enqueue_waiting_on_a_worker_is_bounded_too(connect):
    """mode => 'enqueue' without the replay guard (its recent duplicate is a
    read there): the enqueue of a known key locks it, and a worker's open
    transaction (its step checkpointed) holds that lock. Answered
    in_progress by the deadline, the worker unaffected."""
    source = "github_wait_noguard"
    with connect() as conn:
        conn.execute("INSERT INTO webhook_dedup.sources (source, provider, replay_guard) VALUES (%s, 'github', false)"
                     " ON CONFLICT (source) DO NOTHING", (source,))
        # recent duplicates are reads for webhook_dedup.duplicate_record_interval: an old key is locked
        event = new_id()
        payload, headers = delivery(event)
        call = ("SELECT * FROM webhook_dedup.webhook_receive('github', %s, %s, ARRAY[%s], source => %s,"
                " mode => 'enqueue', wait => %s::interval)")
        assert conn.cursor(row_factory=dict_row).execute(
            call, (payload, Jsonb(headers), SECRET, source, "0")).fetchone()["outcome"] == "accepted"
        conn.execute("UPDATE webhook_dedup.keys SET last_seen_at = now() - interval '1 hour'"
                     " WHERE source = %s AND idem_key = %s", (source, f"{source}:{event}"))
        with connect() as worker:
            worker.execute("BEGIN")
            taken = worker.execute("SELECT idem_key, claim_token FROM webhook_dedup.webhook_next(%s)",
                                   (source,)).fetchone()
            assert taken[0] == f"{source}:{event}"
            worker.execute("SELECT webhook_dedup.webhook_checkpoint(%s, %s, %s, 'step')", (source, *taken))
            started = time.monotonic()
            row = conn.cursor(row_factory=dict_row).execute(
                call, (payload, Jsonb(headers), SECRET, source, "1 second")).fetchone()
            elapsed = time.monotonic() - started
            assert (row["outcome"], row["http_status"]) == ("in_progress", 503), row
            assert 1.0 <= elapsed < 2.5, elapsed
            worker.execute("COMMIT")
        conn.execute("DELETE FROM webhook_dedup.keys WHERE source = %s", (source,))
        conn.execute("DELETE FROM webhook_dedup.sources WHERE source = %s", (source,))


def test_a_shorter_lock_timeout_of_the_session_is_the_callers(connect):
    """A session whose own lock_timeout ends before the time left keeps it:
    a lock wait that runs out then raises its 55P03 as before (the caller
    chose it), not turned into an answer. Here the copy's look waits for a
    first claim still inside its open transaction, with 5 s left."""
    event = new_id()
    with connect() as holder, connect() as timed:
        holder.execute("BEGIN")
        assert receive(holder, event, wait="0", lease="60 seconds")["outcome"] == "claimed"
        timed.execute("SET lock_timeout = '200ms'")
        started = time.monotonic()
        with pytest.raises(psycopg.errors.LockNotAvailable):
            receive(timed, event, wait="5 seconds")
        assert time.monotonic() - started < 2
        holder.execute("ROLLBACK")


def test_a_claim_rolled_back_by_the_bound_is_not_counted(connect):
    """Found by review: the claim counts its outcome before the archive
    insert that follows it; a lock wait there that runs out rolls the claim
    back, and it must not stay counted. A day partition of the archive
    locked by another session (as purge_redactions' CLUSTER locks it): the
    claim answers in_progress, no key stays, and the counters say one
    delivery answered in_progress, no first claim."""
    source = "github_wait_archived"
    with connect() as conn, connect() as locker:
        conn.execute("INSERT INTO webhook_dedup.sources (source, provider, keep_payload) VALUES (%s, 'github', true)"
                     " ON CONFLICT (source) DO NOTHING", (source,))
        conn.execute("SELECT * FROM webhook_dedup.run_maintenance()")  # the day partitions
        today = conn.execute("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')").fetchone()[0]

        def counts():
            return conn.execute(
                "SELECT coalesce(sum(deliveries), 0), coalesce(sum(first_claims), 0),"
                "       coalesce(sum(duplicates_in_progress), 0)"
                "  FROM webhook_dedup.duplicate_metrics WHERE source = %s", (source,)).fetchone()

        before = counts()
        locker.execute("BEGIN")
        locker.execute(f"LOCK TABLE webhook_dedup.archive_{today} IN ACCESS EXCLUSIVE MODE")
        event = new_id()
        payload, headers = delivery(event)
        started = time.monotonic()
        row = conn.cursor(row_factory=dict_row).execute(
            "SELECT outcome, http_status FROM webhook_dedup.webhook_receive('github', %s, %s, ARRAY[%s],"
            " source => %s, wait => '1 second')", (payload, Jsonb(headers), SECRET, source)).fetchone()
        assert (row["outcome"], row["http_status"]) == ("in_progress", 503)
        assert time.monotonic() - started < 2.5
        locker.execute("ROLLBACK")
        assert key_row(conn, event, source) is None
        after = counts()
        assert [a - b for a, b in zip(after, before)] == [1, 0, 1]
        conn.execute("DELETE FROM webhook_dedup.sources WHERE source = %s", (source,))
