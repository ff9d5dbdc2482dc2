"""The example receiver over real HTTP against the real extension, one fault at a time.

Every test uses fresh delivery ids, so the tests share one receiver and one
database without seeing each other's keys.
"""

import email.message
import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import psycopg
from psycopg.rows import namedtuple_row

from support import FIXTURES, LEASE_SECONDS, SECRET  # also puts examples/ on sys.path

import receiver
from replay import (CRASH_AFTER_CHECKPOINT, CRASH_AFTER_CLAIM, FAULT_HEADER, NOTIFIED,
                    as_new_event, github_headers, post, sign)

PUSH = (FIXTURES / "push" / "payload.json").read_bytes()


def new_delivery_id() -> str:
    return str(uuid.uuid4())


def body_of(delivery_id: str) -> bytes:
    """The push fixture as the event of `delivery_id` (GitHub never sends one
    body for two events; the replay guard answers a re-sent body duplicate)."""
    return as_new_event(PUSH, delivery_id)


def signed(delivery_id: str, body: bytes = None, secret: str = SECRET) -> dict:
    return github_headers(delivery_id, "push", sign(secret, body_of(delivery_id) if body is None else body))


def sleep_until_the_lease_expired(claimed_by: float) -> None:
    """Sleep until a lease granted by time.monotonic() == claimed_by has surely expired."""
    time.sleep(max(0.0, claimed_by + LEASE_SECONDS + 0.5 - time.monotonic()))


def webhook_key(conn, delivery_id: str) -> str:
    return conn.execute("SELECT webhook_dedup.webhook_key('github', %s)", (delivery_id,)).fetchone()[0]


def claim(conn, key: str, lease: str):
    """A webhook_claim row for the push fixture, as the receiver gets it."""
    return conn.cursor(row_factory=namedtuple_row).execute(
        "SELECT * FROM webhook_dedup.webhook_claim('github', %s, %s, %s::interval, 'push')", (key, PUSH, lease)
    ).fetchone()


def test_sequential_duplicate_gets_the_first_answer_and_no_second_side_effect(receiver_url, db):
    delivery = new_delivery_id()

    first = post(receiver_url, body_of(delivery), signed(delivery))
    second = post(receiver_url, body_of(delivery), signed(delivery))

    assert (first.status, first.outcome, first.resumed_from) == (200, "claimed", None)
    assert (second.status, second.outcome) == (200, "duplicate")
    assert second.body == first.body
    assert json.loads(first.body)["status"] == 200
    assert db.notification_attempts(delivery) == [1]
    assert db.side_effect_attempts(delivery) == [1]
    assert db.key(delivery) == ("completed", 1)


def test_concurrent_copies_process_once(receiver_url, db):
    delivery = new_delivery_id()
    barrier = threading.Barrier(2)
    with ThreadPoolExecutor(max_workers=2) as pool:
        copies = list(pool.map(lambda _: post(receiver_url, body_of(delivery), signed(delivery), barrier),
                               range(2)))

    winners = [a for a in copies if a.outcome == "claimed"]
    losers = [a for a in copies if a.outcome != "claimed"]
    assert len(winners) == 1 and winners[0].status == 200
    # The loser either hit the live lease or arrived after the completion.
    assert (losers[0].status, losers[0].outcome) in {(409, "in_progress"), (200, "duplicate")}
    if losers[0].status == 409:
        assert losers[0].retry_after == "1"

    # The provider retries the non-2xx copy; both answers are in by now, so
    # the key is completed and the retry is answered from the stored result.
    retry = post(receiver_url, body_of(delivery), signed(delivery))
    assert (retry.status, retry.outcome) == (200, "duplicate")
    assert retry.body == winners[0].body
    assert db.notification_attempts(delivery) == [1]
    assert db.side_effect_attempts(delivery) == [1]
    assert db.key(delivery) == ("completed", 1)


def test_crash_after_claim_is_reclaimed_once_the_lease_expires(receiver_url, db):
    delivery = new_delivery_id()

    crashed = post(receiver_url, body_of(delivery), {**signed(delivery), FAULT_HEADER: CRASH_AFTER_CLAIM})
    crashed_at = time.monotonic()
    assert crashed.status is None  # connection closed, no response at all
    assert db.key(delivery) == ("processing", 1)
    # The notification was inserted but neither it nor its checkpoint was
    # committed: the dead connection took both along.
    assert db.last_step(delivery) is None
    assert db.notification_attempts(delivery) == []
    assert db.side_effect_attempts(delivery) == []

    early = post(receiver_url, body_of(delivery), signed(delivery))
    assert (early.status, early.outcome, early.retry_after) == (409, "in_progress", "1")
    assert db.key(delivery) == ("processing", 1)

    sleep_until_the_lease_expired(crashed_at)
    late = post(receiver_url, body_of(delivery), signed(delivery))
    # Nothing was checkpointed, so the reclaim does both steps.
    assert (late.status, late.outcome, late.resumed_from) == (200, "reclaimed", None)
    assert db.key(delivery) == ("completed", 2)
    assert db.notification_attempts(delivery) == [2]
    assert db.side_effect_attempts(delivery) == [2]


def test_crash_after_checkpoint_resumes_from_it_once_the_lease_expires(receiver_url, db):
    delivery = new_delivery_id()

    crashed = post(receiver_url, body_of(delivery), {**signed(delivery), FAULT_HEADER: CRASH_AFTER_CHECKPOINT})
    crashed_at = time.monotonic()
    assert crashed.status is None  # connection closed, no response at all
    # The notification committed with its checkpoint; the final step never ran.
    assert db.key(delivery) == ("processing", 1)
    assert db.last_step(delivery) == NOTIFIED
    assert db.notification_attempts(delivery) == [1]
    assert db.side_effect_attempts(delivery) == []

    sleep_until_the_lease_expired(crashed_at)
    late = post(receiver_url, body_of(delivery), signed(delivery))
    assert (late.status, late.outcome, late.resumed_from) == (200, "reclaimed", NOTIFIED)
    assert db.notification_attempts(delivery) == [1]  # not notified again
    assert db.side_effect_attempts(delivery) == [2]
    assert db.key(delivery) == ("completed", 2)


def test_stale_claim_token_rolls_back_its_notification(db_conn, db):
    """A worker whose lease was reclaimed must not commit its first step (answers 409)."""
    delivery = new_delivery_id()
    key = webhook_key(db_conn, delivery)
    stale = claim(db_conn, key, f"{LEASE_SECONDS} second")
    sleep_until_the_lease_expired(time.monotonic())
    fresh = claim(db_conn, key, "30 seconds")
    assert (stale.outcome, fresh.outcome) == ("claimed", "reclaimed")

    with psycopg.connect("", autocommit=True) as conn:
        lost = receiver.process_claimed(conn, key, delivery, "push", stale)
        assert (lost.status, lost.retry_after) == (409, 1)
        assert db.notification_attempts(delivery) == []
        assert db.side_effect_attempts(delivery) == []
        assert db.last_step(delivery) is None
        assert db.key(delivery) == ("processing", 2)

        won = receiver.process_claimed(conn, key, delivery, "push", fresh)
    assert (won.status, won.resumed_from) == (200, None)
    assert db.notification_attempts(delivery) == [2]
    assert db.side_effect_attempts(delivery) == [2]
    assert db.key(delivery) == ("completed", 2)


def test_lease_lost_between_the_steps_rolls_back_the_side_effect(db_conn, db):
    """A worker reclaimed after its checkpoint must not commit its final step; the
    reclaiming worker resumes from the checkpoint."""
    delivery = new_delivery_id()
    key = webhook_key(db_conn, delivery)
    stale = claim(db_conn, key, f"{LEASE_SECONDS} second")

    with psycopg.connect("", autocommit=True) as conn:
        assert receiver.notify(conn, key, delivery, stale)
        sleep_until_the_lease_expired(time.monotonic())
        fresh = claim(db_conn, key, "30 seconds")
        assert (fresh.outcome, fresh.last_step) == ("reclaimed", NOTIFIED)

        lost = receiver.complete(conn, key, delivery, "push", stale)
        assert (lost.status, lost.retry_after) == (409, 1)
        assert db.side_effect_attempts(delivery) == []
        assert db.key(delivery) == ("processing", 2)

        won = receiver.process_claimed(conn, key, delivery, "push", fresh)
    assert (won.status, won.resumed_from) == (200, NOTIFIED)
    assert db.notification_attempts(delivery) == [1]
    assert db.side_effect_attempts(delivery) == [2]
    assert db.key(delivery) == ("completed", 2)


def test_same_delivery_id_with_other_bytes_is_a_conflict(receiver_url, db):
    delivery = new_delivery_id()
    other_body = as_new_event((FIXTURES / "ping" / "payload.json").read_bytes(), delivery)
    assert other_body != body_of(delivery)

    first = post(receiver_url, body_of(delivery), signed(delivery))
    reused = post(receiver_url, other_body, signed(delivery, other_body))

    assert (first.status, first.outcome) == (200, "claimed")
    assert (reused.status, reused.outcome) == (422, "conflict")
    assert db.notification_attempts(delivery) == [1]
    assert db.side_effect_attempts(delivery) == [1]


def test_a_captured_delivery_resent_under_a_new_id_is_answered_from_the_first(receiver_url, db):
    """GitHub signs the body, not X-GitHub-Delivery: whoever captured a
    delivery can re-send its exact bytes and signature under a new id. The
    replay guard answers it with the first delivery's result, and nothing is
    processed for it; the provider's own redelivery (same id) is a duplicate
    as always."""
    delivery, replay_id = new_delivery_id(), new_delivery_id()
    body = body_of(delivery)

    first = post(receiver_url, body, signed(delivery))
    replayed = post(receiver_url, body, {**signed(delivery), "X-GitHub-Delivery": replay_id})
    redelivered = post(receiver_url, body, signed(delivery))

    assert (first.status, first.outcome) == (200, "claimed")
    assert (replayed.status, replayed.outcome, replayed.body) == (200, "duplicate", first.body)
    assert (redelivered.status, redelivered.outcome) == (200, "duplicate")
    assert db.key(replay_id) is None
    assert db.notification_attempts(replay_id) == [] and db.side_effect_attempts(replay_id) == []
    assert db.notification_attempts(delivery) == [1] and db.side_effect_attempts(delivery) == [1]


def test_tampered_body_is_refused_and_leaves_nothing(receiver_url, db):
    delivery = new_delivery_id()
    tampered = body_of(delivery).replace(b'"ref"', b'"reg"', 1)
    assert tampered != body_of(delivery)

    answer = post(receiver_url, tampered, signed(delivery))  # signature of the original bytes

    assert (answer.status, answer.outcome) == (401, None)
    assert db.key(delivery) is None
    assert db.notification_attempts(delivery) == []
    assert db.side_effect_attempts(delivery) == []


def test_wrong_secret_is_refused_and_leaves_nothing(receiver_url, db):
    delivery = new_delivery_id()

    answer = post(receiver_url, body_of(delivery), signed(delivery, secret="not-" + SECRET))

    assert (answer.status, answer.outcome) == (401, None)
    assert db.key(delivery) is None
    assert db.notification_attempts(delivery) == []
    assert db.side_effect_attempts(delivery) == []


def test_missing_delivery_id_is_a_bad_request(receiver_url):
    delivery = new_delivery_id()
    headers = signed(delivery)
    del headers["X-GitHub-Delivery"]

    answer = post(receiver_url, body_of(delivery), headers)

    assert (answer.status, answer.outcome) == (400, None)
    assert "X-GitHub-Delivery" in json.loads(answer.body)["error"]


def test_headers_json_lowercases_names_and_keeps_repeated_values():
    headers = email.message.Message()
    headers["X-Hub-Signature-256"] = "sha256=aa"
    headers["x-hub-signature-256"] = "sha256=bb"
    headers["X-GitHub-Event"] = "push"

    assert receiver.headers_json(headers) == {
        "x-hub-signature-256": ["sha256=aa", "sha256=bb"],
        "x-github-event": "push",
    }
