"""The transactional outbox against a real cluster (docs/outbox.md):
what one session cannot show.

- Commit visibility: an intent exists for senders only once the
  transaction that wrote it (with the business write and the key's
  completion) commits; a rollback leaves none.
- A stale holder cannot write: the lease of a key that another delivery
  reclaimed writes nothing, and a holder's open transaction makes the
  reclaim wait rather than race it.
- Senders in parallel: four connections drain 400 intents of two targets;
  each intent is handed to exactly one sender and delivered once.
- Crashes of a sender, as real killed processes (SIGKILL) around a real
  HTTP call to a fake downstream service on loopback that deduplicates by
  Idempotency-Key and records every request: killed after the call and
  before the ack, the next sender repeats the call with the same key (the
  downstream performs once, sees the key twice) and the intent is
  delivered once; killed before the call, nothing is lost; for a
  downstream that takes no idempotency key, a sender killed after the call
  leaves the intent parked as unknown_outcome, never sent again.
- A crash of the server: committed intents survive, an uncommitted one
  does not exist after recovery.
"""

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from downstream import Downstream  # noqa: E402  (the e2e tests' fake downstream service)


@pytest.fixture
def downstream():
    d = Downstream()
    yield d
    d.close()


# A sender as its own process, so that it can really die: takes one intent
# of a target, POSTs its request with its downstream key, and acks; or
# dies by SIGKILL at a chosen point.
SENDER = r"""
import json, os, signal, sys, urllib.request
import psycopg
target, url, lease, die = sys.argv[1:5]
with psycopg.connect("", autocommit=True) as conn:
    row = conn.execute("SELECT id, lease_token, downstream_key, request FROM webhook_dedup.webhook_outbox_next(%s, %s::interval)",
                       (target, lease)).fetchone()
    if row is None:
        print("nothing"); sys.exit(0)
    id_, token, key, request = row
    if die == "before_call":
        os.kill(os.getpid(), signal.SIGKILL)
    req = urllib.request.Request(url, data=json.dumps(request).encode(), method="POST",
                                 headers={"Idempotency-Key": key, "Content-Type": "application/json"})
    answer = json.load(urllib.request.urlopen(req, timeout=10))
    if die == "after_call":
        os.kill(os.getpid(), signal.SIGKILL)
    acked = conn.execute("SELECT webhook_dedup.webhook_outbox_ack(%s, %s, %s)",
                         (id_, token, psycopg.types.json.Jsonb(answer))).fetchone()[0]
    print("acked" if acked else "stale")
"""


def sender(target, url, lease="1 second", die="no"):
    done = subprocess.run([sys.executable, "-c", SENDER, target, url, lease, die], capture_output=True, text=True,
                          timeout=60, env=os.environ)
    return done.returncode, done.stdout.strip(), done.stderr


def intent_for(conn, source, key, operation, target, request=None, idempotent=True):
    """Claim the key, write one intent and complete the key in one transaction."""
    with conn.transaction():
        token = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim(%s, %s)", (source, key)).fetchone()[0]
        assert token is not None
        intent = conn.execute(
            "SELECT webhook_dedup.webhook_outbox_put(%s, %s, %s, %s, %s, %s, downstream_idempotent => %s)",
            (source, key, token, operation, target, psycopg.types.json.Jsonb(request or {"amount": 500}), idempotent),
        ).fetchone()[0]
        assert conn.execute("SELECT webhook_dedup.webhook_complete(%s, %s, %s)", (source, key, token)).fetchone()[0]
    return intent


def row(conn, intent):
    return conn.execute("SELECT state, attempt, response, last_error FROM webhook_dedup.outbox WHERE id = %s",
                        (intent,)).fetchone()


def test_an_intent_exists_for_senders_only_once_its_transaction_commits(connect):
    with connect() as writer, connect() as reader:
        writer.execute("BEGIN")
        token = writer.execute("SELECT claim_token FROM webhook_dedup.webhook_claim('ox', 'vis')").fetchone()[0]
        intent = writer.execute("SELECT webhook_dedup.webhook_outbox_put('ox', 'vis', %s, 'refund', 'ox-vis', '{}')",
                                (token,)).fetchone()[0]
        assert reader.execute("SELECT * FROM webhook_dedup.webhook_outbox_next('ox-vis')").fetchall() == []
        writer.execute("COMMIT")
        taken = reader.execute("SELECT id FROM webhook_dedup.webhook_outbox_next('ox-vis')").fetchall()
        assert taken == [(intent,)]
        # a rolled-back handler leaves nothing
        writer.execute("BEGIN")
        token = writer.execute("SELECT claim_token FROM webhook_dedup.webhook_claim('ox', 'gone')").fetchone()[0]
        writer.execute("SELECT webhook_dedup.webhook_outbox_put('ox', 'gone', %s, 'refund', 'ox-vis', '{}')", (token,))
        writer.execute("ROLLBACK")
        assert reader.execute("SELECT count(*) FROM webhook_dedup.outbox WHERE idem_key = 'gone'").fetchone()[0] == 0


def test_a_stale_holder_writes_nothing_and_a_live_one_holds_off_the_reclaim(connect):
    with connect() as a, connect() as b:
        old = a.execute("SELECT claim_token FROM webhook_dedup.webhook_claim('ox', 'stale', lease => '100 ms')").fetchone()[0]
        time.sleep(0.2)
        outcome, new = b.execute("SELECT outcome, claim_token FROM webhook_dedup.webhook_claim('ox', 'stale')").fetchone()
        assert outcome == "reclaimed"
        assert a.execute("SELECT webhook_dedup.webhook_outbox_put('ox', 'stale', %s, 'refund', 'ox-st', '{}')",
                         (old,)).fetchone()[0] is None
        assert b.execute("SELECT webhook_dedup.webhook_outbox_put('ox', 'stale', %s, 'refund', 'ox-st', '{}')",
                         (new,)).fetchone()[0] is not None
        # a holder writing its intent in an open transaction keeps its key
        # locked: a reclaim after its lease expired waits, then finds the
        # key completed
        token = a.execute("SELECT claim_token FROM webhook_dedup.webhook_claim('ox', 'held', lease => '100 ms')"
                          ).fetchone()[0]
        a.execute("BEGIN")
        a.execute("SELECT webhook_dedup.webhook_outbox_put('ox', 'held', %s, 'refund', 'ox-st', '{}')", (token,))
        time.sleep(0.2)
        with ThreadPoolExecutor(1) as pool:
            reclaim = pool.submit(lambda: b.execute("SELECT outcome FROM webhook_dedup.webhook_claim('ox', 'held')"
                                                    ).fetchone()[0])
            time.sleep(0.3)
            assert not reclaim.done(), "the reclaim must wait for the holder's transaction"
            assert a.execute("SELECT webhook_dedup.webhook_complete('ox', 'held', %s)", (token,)).fetchone()[0]
            a.execute("COMMIT")
            assert reclaim.result(timeout=10) == "duplicate"
        assert a.execute("SELECT count(*) FROM webhook_dedup.outbox WHERE idem_key = 'held'").fetchone()[0] == 1


def test_parallel_senders_deliver_each_intent_once(connect):
    with connect() as conn:
        with conn.transaction():
            for i in range(200):
                token = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim('ox', %s)", (f"par-{i}",)
                                     ).fetchone()[0]
                for target in ("ox-par-a", "ox-par-b"):
                    conn.execute("SELECT webhook_dedup.webhook_outbox_put('ox', %s, %s, %s, %s, '{}')",
                                 (f"par-{i}", token, target, target))
                conn.execute("SELECT webhook_dedup.webhook_complete('ox', %s, %s)", (f"par-{i}", token))

    def drain(n):
        taken = []
        mine, other = ("ox-par-a", "ox-par-b") if n % 2 else ("ox-par-b", "ox-par-a")
        with connect() as c:
            while True:
                rows = c.execute("SELECT id, lease_token FROM webhook_dedup.webhook_outbox_next(%s, '1 minute', 7)",
                                 (mine,)).fetchall()
                rows = rows or c.execute("SELECT id, lease_token FROM webhook_dedup.webhook_outbox_next(%s, '1 minute', 7)",
                                         (other,)).fetchall()
                if not rows:
                    return taken
                for id_, token in rows:
                    assert c.execute("SELECT webhook_dedup.webhook_outbox_ack(%s, %s)", (id_, token)).fetchone()[0]
                    taken.append(id_)

    with ThreadPoolExecutor(4) as pool:
        taken = [i for part in pool.map(drain, range(4)) for i in part]
    assert len(taken) == 400 and len(set(taken)) == 400
    with connect() as conn:
        states = conn.execute("SELECT state, attempt, count(*) FROM webhook_dedup.outbox"
                              " WHERE target LIKE 'ox-par-%' GROUP BY 1, 2").fetchall()
        assert states == [("completed", 1, 400)]


def test_a_sender_killed_after_the_call_is_repeated_with_the_same_key_and_performed_once(connect, downstream):
    with connect() as conn:
        intent = intent_for(conn, "ox", "kill-after", "refund", "ox-k1", {"amount": 1200})
    code, _, err = sender("ox-k1", downstream.url, die="after_call")
    assert code == -signal.SIGKILL, err
    assert len(downstream.requests) == 1
    with connect() as conn:
        assert row(conn, intent)[:2] == ("processing", 1), "the dead sender's lease still holds it"
    time.sleep(1.2)  # the lease (1 second) lapses
    code, out, err = sender("ox-k1", downstream.url)
    assert (code, out) == (0, "acked"), err
    keys = [k for k, _ in downstream.requests]
    assert keys == ["refund:ox:kill-after", "refund:ox:kill-after"], "the same key on both attempts"
    assert list(downstream.performed) == ["refund:ox:kill-after"], "performed once"
    with connect() as conn:
        state, attempt, response, _ = row(conn, intent)
        assert (state, attempt, response) == ("completed", 2, {"id": "n_1"})
    # and delivered once: no sender gets it again
    assert sender("ox-k1", downstream.url)[1] == "nothing"


def test_a_sender_killed_before_the_call_loses_nothing(connect, downstream):
    with connect() as conn:
        intent = intent_for(conn, "ox", "kill-before", "refund", "ox-k2")
    code, _, err = sender("ox-k2", downstream.url, die="before_call")
    assert code == -signal.SIGKILL, err
    assert downstream.requests == []
    time.sleep(1.2)
    assert sender("ox-k2", downstream.url)[:2] == (0, "acked")
    assert [k for k, _ in downstream.requests] == ["refund:ox:kill-before"]
    with connect() as conn:
        assert row(conn, intent)[:2] == ("completed", 2)


def test_without_downstream_idempotency_a_sender_killed_after_the_call_parks_the_intent(connect, downstream):
    with connect() as conn:
        intent = intent_for(conn, "ox", "kill-mail", "email:receipt", "ox-k3", {"to": "a@example.com"},
                            idempotent=False)
    code, _, err = sender("ox-k3", downstream.url, die="after_call")
    assert code == -signal.SIGKILL, err
    time.sleep(1.2)
    # the next sender does not send it again
    assert sender("ox-k3", downstream.url)[:2] == (0, "nothing")
    assert len(downstream.requests) == 1
    with connect() as conn:
        state, attempt, _, error = row(conn, intent)
        assert (state, attempt) == ("unknown_outcome", 1) and "not idempotent" in error
        parked = conn.execute("SELECT id FROM webhook_dedup.outbox_unknown_outcomes WHERE idem_key = 'kill-mail'"
                              ).fetchall()
        assert parked == [(intent,)]
        # an operator who checked the mail provider's log closes it
        assert conn.execute("SELECT webhook_dedup.webhook_outbox_resolve(%s, 'completed')", (intent,)).fetchone()[0] \
            == "unknown_outcome"


def test_committed_intents_survive_a_server_crash(connect, server):
    with connect() as conn:
        kept = intent_for(conn, "ox", "crash-kept", "refund", "ox-crash")
    pending = connect()
    pending.execute("BEGIN")
    token = pending.execute("SELECT claim_token FROM webhook_dedup.webhook_claim('ox', 'crash-open')").fetchone()[0]
    pending.execute("SELECT webhook_dedup.webhook_outbox_put('ox', 'crash-open', %s, 'refund', 'ox-crash', '{}')",
                    (token,))
    server.crash()
    try:
        pending.close()
    except psycopg.Error:
        pass
    server.start()
    for _ in range(50):
        try:
            with connect() as conn:
                taken = conn.execute("SELECT id FROM webhook_dedup.webhook_outbox_next('ox-crash', batch => 10)"
                                     ).fetchall()
            break
        except psycopg.OperationalError:
            time.sleep(0.2)
    assert taken == [(kept,)]
    with connect() as conn:
        assert conn.execute("SELECT count(*) FROM webhook_dedup.outbox WHERE idem_key = 'crash-open'").fetchone()[0] == 0
