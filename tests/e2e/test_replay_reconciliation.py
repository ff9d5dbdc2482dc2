"""replay.reconcile and the report's reconciliation lines, without a
database or a receiver: the answers and the counters are made up, shaped
like the demo's (scripts/demo.sh), whose report printed 113 duplicates
answered against 99 counted, the 14 replayed copies being counted as
`replayed`, not as duplicates.
"""

from collections import Counter

import support  # noqa: F401  (puts examples/ on sys.path)

import replay


def answers(**outcomes) -> list:
    """Answers with these outcomes (their number each); `unanswered` ones
    (a crashed attempt: no status, no outcome) and `forged` ones (401)."""
    out = []
    for outcome, n in outcomes.items():
        if outcome == "unanswered":
            out += [replay.Answer(None, None, None, b"")] * n
        elif outcome == "forged":
            out += [replay.Answer(401, None, None, b"")] * n
        else:
            status = {"in_progress": 503}.get(outcome, 200)
            out += [replay.Answer(status, outcome, None, b"{}")] * n
    return out


# the demo's shape: 14 replayed copies answered duplicate, 99 other
# duplicates (96 duplicate, 3 in_progress), 13 forgeries, 4 crashed attempts
REPLAYS = answers(duplicate=14)
OTHERS = answers(claimed=252, reclaimed=4, unanswered=4, duplicate=96, in_progress=3, forged=13)
COUNTED = {"deliveries": 252 + 4 + 4 + 96 + 3, "first_claims": 256, "reclaims": 4, "duplicates": 99,
           "signature_rejections": 13, "replayed": 14}


def test_the_counters_add_up_to_the_answers():
    equations = replay.reconcile(OTHERS + REPLAYS, REPLAYS, COUNTED)
    assert [str(e) for e in equations] == [
        "386 requests (webhook_receive calls) = 359 counted deliveries + 13 signature rejections + 14 replays",
        "13 answered 401 = 13 counted signature rejections",
        "14 replayed copies sent = 14 counted replays",
        "113 answered duplicate or in_progress = 99 counted duplicates"
        " + 14 refused as replays (answered duplicate, counted as replayed)",
    ]
    assert all(e.holds for e in equations)


def test_a_replay_counted_as_a_duplicate_does_not_add_up():
    """What the old check hid by subtracting the replays from the answers:
    here the extension counts a replayed copy twice, as a duplicate and a
    replay."""
    counted = {**COUNTED, "duplicates": 100, "deliveries": 360}
    broken = [str(e) for e in replay.reconcile(OTHERS + REPLAYS, REPLAYS, counted) if not e.holds]
    assert broken == [
        "386 requests (webhook_receive calls) != 360 counted deliveries + 13 signature rejections + 14 replays",
        "113 answered duplicate or in_progress != 100 counted duplicates"
        " + 14 refused as replays (answered duplicate, counted as replayed)",
    ]


def test_each_counter_that_misses_breaks_its_line():
    for name, lines in [("signature_rejections", {0, 1}), ("replayed", {0, 2, 3}), ("deliveries", {0}),
                        ("duplicates", {3})]:
        counted = {**COUNTED, name: COUNTED[name] - 1}
        equations = replay.reconcile(OTHERS + REPLAYS, REPLAYS, counted)
        assert {i for i, e in enumerate(equations) if not e.holds} == lines, name


def test_the_report_prints_the_reconciliation():
    equations = replay.reconcile(OTHERS + REPLAYS, REPLAYS, {**COUNTED, "duplicates": 98})
    report = replay.Report(
        requests=len(OTHERS + REPLAYS), accepted=0, outcomes=Counter(a.outcome for a in OTHERS + REPLAYS if a.outcome),
        resumed=0, rejected_signatures=13, notifications_histogram={}, side_effects_histogram={},
        tampered_stored=0, metrics_columns=["source"], metrics_rows=[("github",)], states_rows=[],
        problems=["webhook_dedup.duplicate_metrics does not add up: " + str(equations[3])],
        reconciliation=equations, replays_refused=14)
    text = replay.format_report(report, [])
    assert ("duplicates absorbed:        113 (duplicate 110, in_progress 3;"
            " 14 of them replayed copies refused by the replay guard)") in text
    assert ("\n  113 answered duplicate or in_progress != 98 counted duplicates"
            " + 14 refused as replays (answered duplicate, counted as replayed)   <- does not add up\n") in text
    assert "\n  14 replayed copies sent = 14 counted replays\n" in text
    assert "checked against the answers above" not in text
    assert text.endswith("FAILED: 1 problem(s)\n  webhook_dedup.duplicate_metrics does not add up: 113 answered"
                         " duplicate or in_progress != 98 counted duplicates + 14 refused as replays (answered"
                         " duplicate, counted as replayed)")
