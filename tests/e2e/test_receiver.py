"""The example receiver over real HTTP against the real extension, one fault at a time.

Every test uses fresh delivery ids, so the tests share one receiver and one
database without seeing each other's keys. Every answer is checked against
the one the database computes (webhook_dedup.http_answer): the receiver
sends its status, headers and body, and decides none itself.
"""

import email.message
import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import psycopg
import pytest
from psycopg.rows import namedtuple_row
from psycopg.types.json import Jsonb

from support import (FIXTURES, LEASE_SECONDS, LEFT_BY_THE_HOLDER, SECRET, assert_database_answer,  # also puts examples/ on sys.path
                     http_answer)

import receiver
from replay import (CRASH_AFTER_CHECKPOINT, CRASH_AFTER_CLAIM, FAULT_HEADER, NOTIFIED,
                    as_new_event, github_headers, post, sign)

PUSH = (FIXTURES / "push" / "payload.json").read_bytes()
# The lease of the receivers a slow holder runs on: far longer than its
# sleep (receiver.SLOW_SECONDS), so that no copy reclaims its key meanwhile.
SLOW_LEASE_SECONDS = 30
CHECKPOINT_DEADLINE_S = 15


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


def receive(conn, delivery_id: str, lease: str):
    """webhook_receive's row for the delivery's push, as the receiver gets it (no wait)."""
    return conn.cursor(row_factory=namedtuple_row).execute(
        "SELECT * FROM webhook_dedup.webhook_receive('github', %s, %s, ARRAY[%s],"
        " lease => %s::interval, wait => '0')",
        (body_of(delivery_id), Jsonb(receiver.headers_json(signed(delivery_id))), SECRET, lease),
    ).fetchone()


def wait_for_checkpoint(conn, delivery_id: str) -> None:
    """Until the delivery's first step committed (a slow holder then sleeps)."""
    deadline = time.monotonic() + CHECKPOINT_DEADLINE_S
    while time.monotonic() < deadline:
        row = conn.execute(
            "SELECT last_step FROM webhook_dedup.keys"
            " WHERE source = 'github' AND idem_key = webhook_dedup.webhook_key('github', %s)",
            (delivery_id,)).fetchone()
        if row and row[0] == NOTIFIED:
            return
        time.sleep(0.05)
    pytest.fail(f"the holder of {delivery_id} did not checkpoint within {CHECKPOINT_DEADLINE_S} s")


def test_sequential_duplicate_gets_the_first_answer_and_no_second_side_effect(receiver_url, db):
    delivery = new_delivery_id()

    first = post(receiver_url, body_of(delivery), signed(delivery))
    second = post(receiver_url, body_of(delivery), signed(delivery))

    assert (first.status, first.outcome, first.resumed_from) == (200, "claimed", None)
    assert (second.status, second.outcome) == (200, "duplicate")
    assert second.body == first.body
    assert json.loads(first.body)["status"] == 200
    assert_database_answer(db.conn, first, "claimed", body=json.loads(first.body))
    assert_database_answer(db.conn, second, "duplicate", body=json.loads(first.body))
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
    # The loser either hit the live lease (this receiver does not wait) or
    # arrived after the completion.
    assert (losers[0].status, losers[0].outcome) in {(503, "in_progress"), (200, "duplicate")}
    if losers[0].status == 503:
        assert_database_answer(db.conn, losers[0], "in_progress", retry_after_max=LEASE_SECONDS)

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
    # 503 with Retry-After: the seconds left on the dead holder's lease
    assert (early.status, early.outcome, early.retry_after) == (503, "in_progress", str(LEASE_SECONDS))
    assert_database_answer(db.conn, early, "in_progress", retry_after_max=LEASE_SECONDS)
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


def assert_lease_lost(conn, answer: receiver.Response) -> None:
    """The answer to a lost lease: http_answer('lease_lost', 'github'), a 503
    without Retry-After (when the key's new holder finishes is not known)."""
    expected = http_answer(conn, "lease_lost", "github")
    assert (answer.status, answer.headers, answer.body) == \
        (expected.http_status, expected.http_headers, expected.response)
    assert (answer.status, answer.headers, answer.body) == \
        (503, {"Content-Type": "application/json"}, {"status": "lease_lost"})


def test_stale_claim_token_rolls_back_its_notification(db_conn, db):
    """A worker whose lease was reclaimed must not commit its first step (answers 503)."""
    delivery = new_delivery_id()
    stale = receive(db_conn, delivery, f"{LEASE_SECONDS} second")
    key = stale.idem_key
    sleep_until_the_lease_expired(time.monotonic())
    fresh = receive(db_conn, delivery, "30 seconds")
    assert (stale.outcome, fresh.outcome) == ("claimed", "reclaimed")

    with psycopg.connect("", autocommit=True) as conn:
        lost = receiver.process_claimed(conn, key, delivery, "push", stale)
        assert_lease_lost(db_conn, lost)
        assert db.notification_attempts(delivery) == []
        assert db.side_effect_attempts(delivery) == []
        assert db.last_step(delivery) is None
        assert db.key(delivery) == ("processing", 2)

        won = receiver.process_claimed(conn, key, delivery, "push", fresh)
    assert (won.status, won.headers, won.resumed_from) == (200, fresh.http_headers, None)
    assert won.body == {"status": 200, "side_effect_id": won.body["side_effect_id"]}
    assert db.notification_attempts(delivery) == [2]
    assert db.side_effect_attempts(delivery) == [2]
    assert db.key(delivery) == ("completed", 2)


def test_lease_lost_between_the_steps_rolls_back_the_side_effect(db_conn, db):
    """A worker reclaimed after its checkpoint must not commit its final step; the
    reclaiming worker resumes from the checkpoint."""
    delivery = new_delivery_id()
    stale = receive(db_conn, delivery, f"{LEASE_SECONDS} second")
    key = stale.idem_key

    with psycopg.connect("", autocommit=True) as conn:
        assert receiver.notify(conn, key, delivery, stale)
        sleep_until_the_lease_expired(time.monotonic())
        fresh = receive(db_conn, delivery, "30 seconds")
        assert (fresh.outcome, fresh.last_step) == ("reclaimed", NOTIFIED)

        lost = receiver.complete(conn, key, delivery, "push", stale)
        assert_lease_lost(db_conn, lost)
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
    # Answered 200: every retry of these bytes would conflict again (the
    # conflicting payload waits in webhook_dedup.conflicts for an operator).
    assert (reused.status, reused.outcome, json.loads(reused.body)) == (200, "conflict", {"status": "conflict"})
    assert_database_answer(db.conn, reused, "conflict")
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
    assert_database_answer(db.conn, answer, "rejected")
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


def test_missing_delivery_id_is_a_bad_request(receiver_url, db):
    delivery = new_delivery_id()
    headers = signed(delivery)
    del headers["X-GitHub-Delivery"]

    answer = post(receiver_url, body_of(delivery), headers)

    assert (answer.status, answer.outcome) == (400, None)
    assert_database_answer(db.conn, answer, "missing_event_id")


def test_a_copy_in_flight_waits_for_its_holder_and_gets_the_first_answer(start_receiver, db):
    """A copy that arrives while a slow holder processes the delivery waits
    (GitHub's default wait, the receiver given none) until the holder
    completes, and is answered as the duplicate it then is: 200 with the
    holder's own body."""
    default_wait = db.conn.execute("SELECT default_wait FROM webhook_dedup.providers"
                                   " WHERE scheme = 'github'").fetchone()[0]
    assert default_wait >= timedelta(seconds=receiver.SLOW_SECONDS + 3), default_wait
    url = start_receiver(f"{SLOW_LEASE_SECONDS} seconds")
    delivery = new_delivery_id()

    with ThreadPoolExecutor(max_workers=1) as pool:
        holder = pool.submit(post, url, body_of(delivery), {**signed(delivery), FAULT_HEADER: receiver.SLOW})
        wait_for_checkpoint(db.conn, delivery)  # the holder sleeps now, between its steps
        assert db.key(delivery) == ("processing", 1)
        copy = post(url, body_of(delivery), signed(delivery))
        first = holder.result()

    assert (first.status, first.outcome) == (200, "claimed")
    assert (copy.status, copy.outcome, copy.body) == (200, "duplicate", first.body)
    assert_database_answer(db.conn, copy, "duplicate", body=json.loads(first.body))
    assert db.notification_attempts(delivery) == [1]
    assert db.side_effect_attempts(delivery) == [1]
    assert db.key(delivery) == ("completed", 1)


def test_a_copy_whose_holder_died_waits_out_its_lease_and_reclaims(receiver_url, start_receiver, db):
    """The holder dies after its claim; a copy sent at once to a receiver
    that waits (GitHub's default, longer than the 1 s lease) waits until
    the dead holder's lease expires, then reclaims the key and does the job:
    no 503 for the provider to retry."""
    waiting = start_receiver(f"{LEASE_SECONDS} second")
    delivery = new_delivery_id()

    crashed = post(receiver_url, body_of(delivery), {**signed(delivery), FAULT_HEADER: CRASH_AFTER_CLAIM})
    assert crashed.status is None and db.key(delivery) == ("processing", 1)
    copy = post(waiting, body_of(delivery), signed(delivery))

    assert (copy.status, copy.outcome) == (200, "reclaimed"), copy
    assert_database_answer(db.conn, copy, "reclaimed", body=json.loads(copy.body))
    assert db.notification_attempts(delivery) == [2]
    assert db.side_effect_attempts(delivery) == [2]
    assert db.key(delivery) == ("completed", 2)


def test_a_copy_whose_wait_ends_first_gets_503_with_retry_after(start_receiver, db):
    """A copy that waits less (0.5 s) than the slow holder takes is answered
    503 with Retry-After, the seconds left on the holder's lease; its retry,
    after the holder completed, gets the first answer."""
    url = start_receiver(f"{SLOW_LEASE_SECONDS} seconds")
    impatient = start_receiver(f"{SLOW_LEASE_SECONDS} seconds", "0.5 seconds")
    delivery = new_delivery_id()

    with ThreadPoolExecutor(max_workers=1) as pool:
        holder = pool.submit(post, url, body_of(delivery), {**signed(delivery), FAULT_HEADER: receiver.SLOW})
        wait_for_checkpoint(db.conn, delivery)
        copy = post(impatient, body_of(delivery), signed(delivery))
        first = holder.result()
    retry = post(impatient, body_of(delivery), signed(delivery))

    assert (copy.status, copy.outcome, json.loads(copy.body)) == (503, "in_progress", {"status": "in_progress"})
    assert_database_answer(db.conn, copy, "in_progress", retry_after_max=SLOW_LEASE_SECONDS)
    assert (first.status, first.outcome) == (200, "claimed")
    assert (retry.status, retry.outcome, retry.body) == (200, "duplicate", first.body)
    assert db.side_effect_attempts(delivery) == [1]


@pytest.mark.parametrize("outcome", sorted(LEFT_BY_THE_HOLDER))
def test_a_delivery_of_a_failed_or_parked_key_is_answered_from_its_state(receiver_url, db, outcome):
    left, status, retry_after_max = LEFT_BY_THE_HOLDER[outcome]
    delivery = new_delivery_id()
    key = webhook_key(db.conn, delivery)
    token = db.conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim('github', %s, %s, '30 seconds', 'push')",
                            (key, body_of(delivery))).fetchone()[0]
    db.conn.execute(left, (key, token))

    answer = post(receiver_url, body_of(delivery), signed(delivery))

    assert (answer.status, answer.outcome, json.loads(answer.body)) == (status, outcome, {"status": outcome})
    assert_database_answer(db.conn, answer, outcome, retry_after_max=retry_after_max)
    assert db.notification_attempts(delivery) == [] and db.side_effect_attempts(delivery) == []


def test_a_database_error_is_answered_as_http_answer_error(receiver_url, db):
    """The answer the receiver read at start-up, http_answer('error'): 500."""
    delivery = new_delivery_id()
    db.conn.execute("REVOKE webhook_dedup_receiver FROM demo_receiver")  # webhook_receive: permission denied
    try:
        answer = post(receiver_url, body_of(delivery), signed(delivery))
    finally:
        db.conn.execute("GRANT webhook_dedup_receiver TO demo_receiver")

    assert (answer.status, json.loads(answer.body)) == (500, {"error": "internal error"})
    assert_database_answer(db.conn, answer, "error")
    assert db.key(delivery) is None


def test_headers_json_lowercases_names_and_keeps_repeated_values():
    headers = email.message.Message()
    headers["X-Hub-Signature-256"] = "sha256=aa"
    headers["x-hub-signature-256"] = "sha256=bb"
    headers["X-GitHub-Event"] = "push"

    assert receiver.headers_json(headers) == {
        "x-hub-signature-256": ["sha256=aa", "sha256=bb"],
        "x-github-event": "push",
    }
