"""Bulk redrive against a real cluster, with concurrent sessions: a redrive
racing live deliveries of the same keys and two workers processes each key
exactly once; a redaction during a redrive never lets a worker get a key
without its payload; payload retention expiring while a redrive holds a key
takes nothing from it.

Every key's processing is an insert into a table of the test and
webhook_complete in one transaction (rolled back when the completion is
refused), so "processed" means committed, as in a real receiver.
"""

import os
import random
import threading
import time

import psycopg
import pytest

DEADLINE_S = 60


@pytest.fixture()
def source(connect):
    name = f"rr-{os.getpid()}-{random.randrange(10**9)}"
    with connect() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS public.rr_effects (source text, idem_key text, via text)")
        conn.execute("INSERT INTO webhook_dedup.sources (source, keep_payload) VALUES (%s, true)", (name,))
        conn.execute("SELECT webhook_dedup.run_maintenance()")  # the archive's day partitions
    yield name
    with connect() as conn:
        conn.execute("DELETE FROM public.rr_effects WHERE source = %s", (name,))
        conn.execute("DELETE FROM webhook_dedup.sources WHERE source = %s", (name,))


def dead_letters(conn, source, n) -> list:
    """n keys claimed with a payload (archived) and failed for good."""
    keys = [f"k{i:03d}" for i in range(n)]
    for k in keys:
        tok = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim(%s, %s, %s)",
                           (source, k, f"body of {k}".encode())).fetchone()[0]
        assert conn.execute("SELECT webhook_dedup.webhook_fail(%s, %s, %s, 'down', retryable => false)",
                            (source, k, tok)).fetchone()[0] == "dead_lettered"
    return keys


def process(conn, source, key, token, via) -> bool:
    """The receiver's work and its completion, in one transaction (rolled
    back when the completion is refused: the lease was lost)."""
    completed = False
    with conn.transaction():
        conn.execute("INSERT INTO public.rr_effects VALUES (%s, %s, %s)", (source, key, via))
        completed = conn.execute("SELECT webhook_dedup.webhook_complete(%s, %s, %s)",
                                 (source, key, token)).fetchone()[0]
        if not completed:
            raise psycopg.Rollback()
    return completed


def run_until(what, stop, body):
    deadline = time.monotonic() + DEADLINE_S
    while not stop.is_set() and time.monotonic() < deadline:
        body()
    if not stop.is_set():
        raise AssertionError(f"{what}: not done in {DEADLINE_S} s")


def work(connect, source, stop, handed):
    """A worker: takes the source's due keys (webhook_next) and processes
    each, until `stop`; every (key, payload) it was handed goes to `handed`."""
    with connect() as conn:
        def body():
            rows = conn.execute("SELECT idem_key, claim_token, payload FROM webhook_dedup.webhook_next(%s, batch => 2)",
                                (source,)).fetchall()
            for key, tok, payload in rows:
                handed.append((key, payload))
                process(conn, source, key, tok, "worker")
            if not rows:
                time.sleep(0.01)
        run_until("worker", stop, body)


def redrive_done(conn, run) -> bool:
    return conn.execute("SELECT status FROM webhook_dedup.redrive_runs WHERE id = %s", (run,)).fetchone()[0] == "done"


def maintain(connect, run):
    """Maintenance passes until the run is done (as the worker runs them)."""
    with connect() as conn:
        deadline = time.monotonic() + DEADLINE_S
        while not redrive_done(conn, run) and time.monotonic() < deadline:
            conn.execute("SELECT webhook_dedup.run_maintenance()")
            time.sleep(0.05)


def test_a_redrive_racing_live_deliveries_processes_each_key_once(connect, source):
    with connect() as conn:
        keys = dead_letters(conn, source, 40)
        run = conn.execute("SELECT run FROM webhook_dedup.redrive(%s)", (source,)).fetchone()[0]
    stop = threading.Event()
    errors, handed = [], []

    def worker():
        work(connect, source, stop, handed)

    def live_delivery(seed):
        rng = random.Random(seed)
        with connect() as conn:
            def body():
                k = rng.choice(keys)
                row = conn.execute("SELECT outcome, claim_token FROM webhook_dedup.webhook_claim(%s, %s, %s)",
                                   (source, k, f"body of {k}".encode())).fetchone()
                if row[0] in ("claimed", "reclaimed"):
                    process(conn, source, k, row[1], "live")
            run_until("live delivery", stop, body)

    def guarded(f, *a):
        try:
            f(*a)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
            stop.set()

    threads = [threading.Thread(target=guarded, args=(worker,)) for _ in range(2)]
    threads += [threading.Thread(target=guarded, args=(live_delivery, s)) for s in (1, 2)]
    threads.append(threading.Thread(target=guarded, args=(maintain, connect, run)))
    for t in threads:
        t.start()
    with connect() as conn:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and not stop.is_set():
            done = conn.execute("SELECT count(*) FROM webhook_dedup.keys WHERE source = %s AND state = 'completed'",
                                (source,)).fetchone()[0]
            if done == len(keys):
                break
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join()
        assert errors == []
        effects = dict(conn.execute("SELECT idem_key, count(*) FROM public.rr_effects WHERE source = %s"
                                    " GROUP BY 1", (source,)).fetchall())
        vias = {v for (v,) in conn.execute("SELECT DISTINCT via FROM public.rr_effects WHERE source = %s",
                                            (source,)).fetchall()}
        states = dict(conn.execute("SELECT state, count(*) FROM webhook_dedup.keys WHERE source = %s GROUP BY 1",
                                   (source,)).fetchall())
    assert states == {"completed": len(keys)}
    assert effects == {k: 1 for k in keys}, "each key processed exactly once"
    assert all(p is not None and bytes(p) == f"body of {k}".encode() for k, p in handed)
    # both paths took part (the race was real)
    assert vias == {"worker", "live"}, vias


def test_a_redaction_during_a_redrive_never_hands_out_an_empty_key(connect, source):
    with connect() as conn:
        keys = dead_letters(conn, source, 30)
        early, moved, racing, kept = keys[:5], keys[5:10], keys[10:20], keys[20:]
        run = conn.execute("SELECT run FROM webhook_dedup.redrive(%s)", (source,)).fetchone()[0]
        # redacted before the worker reached them: nothing to process them with
        for k in early:
            conn.execute("SELECT webhook_dedup.redact(%s, idem_key => %s)", (source, k))
        while not redrive_done(conn, run):
            conn.execute("SELECT webhook_dedup.run_maintenance()")
        outcomes = dict(conn.execute("SELECT idem_key, outcome FROM webhook_dedup.redrive_keys WHERE run = %s",
                                     (run,)).fetchall())
        assert {outcomes[k] for k in early} == {"no_payload"}
        assert {outcomes[k] for k in keys[5:]} == {"moved"}
        # redacted once moved, before a worker took them: dead-lettered
        for k in moved:
            conn.execute("SELECT webhook_dedup.redact(%s, idem_key => %s)", (source, k))
    stop = threading.Event()
    handed, errors = [], []

    def worker():
        try:
            work(connect, source, stop, handed)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    with connect() as conn:
        # redacted while the workers take keys
        for k in racing:
            conn.execute("SELECT webhook_dedup.redact(%s, idem_key => %s)", (source, k))
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            left = conn.execute("SELECT count(*) FROM webhook_dedup.keys WHERE source = %s"
                                " AND state IN ('pending', 'processing')", (source,)).fetchone()[0]
            if left == 0:
                break
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join()
        assert errors == []
        effects = dict(conn.execute("SELECT idem_key, count(*) FROM public.rr_effects WHERE source = %s GROUP BY 1",
                                    (source,)).fetchall())
        states = dict(conn.execute("SELECT idem_key, state FROM webhook_dedup.keys WHERE source = %s",
                                   (source,)).fetchall())
    assert all(p is not None for _, p in handed), "no key was handed out without its payload"
    assert all(effects.get(k) == 1 for k in kept), "every key not redacted processed once"
    assert all(k not in effects for k in early + moved), "redacted before being taken: never processed"
    assert {states[k] for k in early + moved} == {"dead_lettered"}
    # a racing redaction either came first (dead-lettered, not processed)
    # or found the key held (its holder completed it, once)
    for k in racing:
        assert (states[k], effects.get(k)) in {("dead_lettered", None), ("completed", 1)}, (k, states[k])


def test_payload_retention_expiring_while_a_redrive_holds_a_key(connect, source):
    with connect() as conn:
        # another source keeps payloads longer, so this one's shorter
        # retention is applied row by row (the day stays)
        conn.execute("INSERT INTO webhook_dedup.sources (source, keep_payload, payload_retention)"
                     " VALUES (%s, true, '3 days')", (source + "-keeper",))
    try:
        expiring(connect, source)
    finally:
        with connect() as conn:
            conn.execute("DELETE FROM webhook_dedup.sources WHERE source = %s", (source + "-keeper",))


def expiring(connect, source):
    with connect() as conn:
        held, waiting, expired = dead_letters(conn, source, 3)
        # one key's archived delivery is past its retention before the run
        conn.execute("UPDATE webhook_dedup.archive SET received_at = received_at - interval '2 hours'"
                     " WHERE source = %s AND idem_key = %s", (source, expired))
        conn.execute("UPDATE webhook_dedup.keys SET first_seen_at = first_seen_at - interval '2 hours'"
                     " WHERE source = %s AND idem_key = %s", (source, expired))
        conn.execute("UPDATE webhook_dedup.sources SET payload_retention = '1 hour' WHERE source = %s", (source,))
        conn.execute("SELECT webhook_dedup.run_maintenance()")
        assert conn.execute("SELECT count(*) FROM webhook_dedup.archive WHERE source = %s AND idem_key = %s",
                            (source, expired)).fetchone()[0] == 0
        run = conn.execute("SELECT run FROM webhook_dedup.redrive(%s)", (source,)).fetchone()[0]
        while not redrive_done(conn, run):
            conn.execute("SELECT webhook_dedup.run_maintenance()")
        outcomes = dict(conn.execute("SELECT idem_key, outcome FROM webhook_dedup.redrive_keys WHERE run = %s",
                                     (run,)).fetchall())
        assert outcomes == {held: "moved", waiting: "moved", expired: "no_payload"}
        # a worker holds one key; then every archived delivery of the source
        # goes past its retention and is deleted
        key, tok, payload = conn.execute("SELECT idem_key, claim_token, payload FROM"
                                         " webhook_dedup.webhook_next(%s, batch => 1)", (source,)).fetchone()
        conn.execute("UPDATE webhook_dedup.archive SET received_at = received_at - interval '2 hours'"
                     " WHERE source = %s", (source,))
        conn.execute("SELECT webhook_dedup.run_maintenance()")
        assert conn.execute("SELECT count(*) FROM webhook_dedup.archive WHERE source = %s",
                            (source,)).fetchone()[0] == 0
        # the holder finishes with what it was handed; the other key is still
        # handed out with its payload (the queue's copy)
        assert bytes(payload) == f"body of {key}".encode()
        assert process(conn, source, key, tok, "worker")
        other, tok2, payload2 = conn.execute("SELECT idem_key, claim_token, payload FROM"
                                             " webhook_dedup.webhook_next(%s, batch => 1)", (source,)).fetchone()
        assert bytes(payload2) == f"body of {other}".encode()
        assert process(conn, source, other, tok2, "worker")
        assert conn.execute("SELECT state FROM webhook_dedup.keys WHERE source = %s AND idem_key = %s",
                            (source, expired)).fetchone()[0] == "dead_lettered"


def test_an_operator_only_may_redrive(connect, source):
    with connect() as conn:
        conn.execute("DROP ROLE IF EXISTS rr_receiver")
        conn.execute("CREATE ROLE rr_receiver LOGIN IN ROLE webhook_dedup_receiver")
    try:
        with psycopg.connect(user="rr_receiver", autocommit=True) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT webhook_dedup.redrive(%s)", (source,))
    finally:
        with connect() as conn:
            conn.execute("DROP ROLE rr_receiver")
