"""A small replay of real GitHub payloads through replay.py, with every fault kind."""

import random
from collections import Counter

import pytest

from support import FIXTURES, LEASE_SECONDS, SECRET, SQL_EDITION_COUNTS, is_sql_edition  # also puts examples/ on sys.path

import replay

EVENTS = 30
SEED = 7


def test_replay_with_every_fault_keeps_exactly_one_of_each_step_per_event(receiver_url, db_conn):
    fixtures = random.Random(SEED).sample(replay.load_fixtures(FIXTURES), EVENTS)
    plan = replay.build_plan(fixtures, SEED)
    kinds = Counter(d.kind for d in plan)
    assert all(kinds[k] >= 1 for k in replay.KINDS), kinds
    assert sum(kinds.values()) - kinds["tampered"] - kinds["replayed"] == EVENTS

    before = replay.metrics_totals(db_conn)
    results = replay.run(plan, receiver_url, SECRET, LEASE_SECONDS)
    report = replay.check(db_conn, results, before)

    crashes = kinds[replay.CRASH_AFTER_CLAIM] + kinds[replay.CRASH_AFTER_CHECKPOINT]
    counts = "webhook_dedup.duplicate_metrics does not add up"
    assert [p for p in report.problems if not p.startswith(counts)] == []
    uncounted = [p for p in report.problems if p.startswith(counts)]
    if not is_sql_edition(db_conn):
        assert uncounted == []
    assert report.notifications_histogram == {1: EVENTS}
    assert report.side_effects_histogram == {1: EVENTS}
    assert report.tampered_stored == 0
    # every replayed copy was answered from its event's key (the check's
    # problems list any that was stored or processed)
    assert report.outcomes["duplicate"] >= kinds["sequential"] + kinds["replayed"]
    assert report.rejected_signatures == kinds["tampered"]
    assert report.outcomes["reclaimed"] == crashes
    # Only a crash after the checkpoint leaves a step to resume from.
    assert report.resumed == kinds[replay.CRASH_AFTER_CHECKPOINT]
    # Every valid event is claimed once; a crash's claim is answered by no one.
    assert report.outcomes["claimed"] == EVENTS - crashes
    assert report.outcomes["duplicate"] >= kinds["sequential"]
    if uncounted:
        # every other assertion held; the counters lag (never lead) the
        # answers by the duplicates still waiting in the receiver's sessions
        assert all(e.holds or sum(n for n, _ in e.right) < e.left[0] for e in report.reconciliation), report.reconciliation
        pytest.skip(f"{SQL_EDITION_COUNTS}: {uncounted}")


def test_check_flags_an_event_that_never_reached_the_database(db_conn):
    fixture = replay.load_fixtures(FIXTURES)[0]
    never_sent = replay.DeliveryResult(replay.make_delivery("plain", fixture))

    report = replay.check(db_conn, [never_sent])

    assert not report.ok
    assert report.notifications_histogram == {0: 1}
    assert report.side_effects_histogram == {0: 1}
    assert any("0 notifications" in p for p in report.problems)
    assert any("0 side effects" in p for p in report.problems)
    assert any("never accepted" in p for p in report.problems)


def test_check_flags_a_crash_after_checkpoint_that_did_not_resume(db_conn):
    fixture = replay.load_fixtures(FIXTURES)[0]
    crashed = replay.DeliveryResult(
        replay.make_delivery(replay.CRASH_AFTER_CHECKPOINT, fixture),
        [replay.Answer(None, None, None, b""), replay.Answer(200, "reclaimed", None, b"{}")],
    )

    report = replay.check(db_conn, [crashed])

    assert any("resumed from None, expected 'notified'" in p for p in report.problems)


def test_check_flags_counters_that_disagree_with_the_answers(db_conn):
    """A delivery the receiver answered but the extension never counted (it
    was never sent) makes the metrics cross-check fail."""
    fixture = replay.load_fixtures(FIXTURES)[0]
    answered = replay.DeliveryResult(
        replay.make_delivery("plain", fixture),
        [replay.Answer(200, "duplicate", None, b"{}")],
    )

    report = replay.check(db_conn, [answered], replay.metrics_totals(db_conn))

    assert [p for p in report.problems if "does not add up" in p] == [
        "webhook_dedup.duplicate_metrics does not add up: 1 requests (webhook_receive calls) != 0 counted deliveries"
        " + 0 signature rejections + 0 replays",
        "webhook_dedup.duplicate_metrics does not add up: 1 answered duplicate or in_progress != 0 counted duplicates"
        " + 0 refused as replays (answered duplicate, counted as replayed)",
    ]
