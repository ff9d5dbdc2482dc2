"""The two editions answer alike (issue 43, item 6): the same calls, with
generated arguments, against the native edition and the SQL edition in
two clusters; each call's rows, or its SQLSTATE, message and hint, must
be equal. A difference is a bug in one edition: fix it and add the case
to EDGES.

So far the functions the SQL edition has (the keys); the sequences of
claims, completions, failures, receives and outbox calls come with those
functions. The number of generated cases per function is bounded for the
test command (WEBHOOK_DEDUP_DIFFERENTIAL_CASES, 300 by default); a longer
run sets it higher.
"""

import os
import random

import pytest

from editions import answer

CASES = int(os.environ.get("WEBHOOK_DEDUP_DIFFERENTIAL_CASES", "300"))
SEED = int(os.environ.get("WEBHOOK_DEDUP_DIFFERENTIAL_SEED", "43"))

# Characters that matter to the rules: the key's delimiters and escapes,
# the downstream key's unreserved set, multi-byte UTF-8, quotes.
ALPHABET = ["a", "Z", "0", "-", ".", "_", "~", ":", "%", "%3A", "%25", "é", "日", "😀", "'", " ", "/", "+"]


def text(rng: random.Random):
    """NULL, empty, short, or long (past the 255-character bounds)."""
    shape = rng.random()
    if shape < 0.05:
        return None
    if shape < 0.10:
        return ""
    n = rng.choice([rng.randint(1, 12), rng.randint(180, 300)])
    return "".join(rng.choice(ALPHABET) for _ in range(n))[:n]


def optional(rng: random.Random):
    return None if rng.random() < 0.5 else text(rng)


def key_call(rng):
    return ("SELECT webhook_dedup.webhook_key(%s, %s, environment => %s, account => %s, operation => %s)",
            (text(rng), text(rng), optional(rng), optional(rng), optional(rng)))


def body_key_call(rng):
    body = None if rng.random() < 0.05 else (text(rng) or "").encode()
    return ("SELECT webhook_dedup.webhook_body_key(%s, %s, environment => %s, account => %s, operation => %s)",
            (text(rng), body, optional(rng), optional(rng), optional(rng)))


def operation_key_call(rng):
    max_length = rng.choice([255, 255, 32, 31, 45, 64, 100, 256, -1, None])
    downstream = rng.choice([None, None, "stripe", "square_payments", "adyen", "paypal_orders", "nope"])
    return ("SELECT webhook_dedup.webhook_operation_key(%s, %s, %s, max_length => %s, downstream => %s)",
            (text(rng), text(rng), text(rng), max_length, downstream))


GENERATORS = {"webhook_key": key_call, "webhook_body_key": body_key_call, "webhook_operation_key": operation_key_call}

# Edge cases, and every case a difference was once found in.
EDGES: list[tuple[str, tuple]] = [
    # a key cut at 189 characters inside multi-byte characters and escapes
    ("SELECT webhook_dedup.webhook_key(%s, %s)", ("s", "é" * 300)),
    ("SELECT webhook_dedup.webhook_key(%s, %s)", ("s", ":" * 100)),
    ("SELECT webhook_dedup.webhook_key(%s, %s, account => %s)", ("s", "e" * 255, "a")),
    # a downstream key's operation cut before a %XX escape, or at one
    ("SELECT webhook_dedup.webhook_operation_key(%s, %s, %s, max_length => %s)", ("s", "k" * 100, "ab%%%" * 20, 40)),
    ("SELECT webhook_dedup.webhook_operation_key(%s, %s, %s, max_length => %s)", ("s", "k" * 100, "a:" * 20, 36)),
    ("SELECT webhook_dedup.webhook_operation_key(%s, %s, %s, max_length => %s)", ("s", "k" * 100, "op", 33)),
    ("SELECT webhook_dedup.webhook_operation_key(%s, %s, %s, max_length => %s)", ("s", "k" * 100, "op", 34)),
    ("SELECT webhook_dedup.webhook_operation_key(%s, %s, %s, downstream => %s)", ("s", "k", "op", "stripe")),
    ("SELECT webhook_dedup.webhook_operation_key(%s, %s, %s, max_length => 45, downstream => %s)",
     ("s", "k", "op", "adyen")),
]


@pytest.mark.parametrize("function", sorted(GENERATORS))
def test_generated_calls_answer_alike(native, sql, function):
    rng = random.Random(f"{SEED}-{function}")
    calls = [GENERATORS[function](rng) for _ in range(CASES)]
    errors = set()
    with native.connect() as a, sql.connect() as b:
        for statement, args in calls:
            x, y = answer(a, statement, args), answer(b, statement, args)
            assert x == y, f"{statement} {args!r}:\n  native: {x}\n  SQL edition: {y}"
            if x[0] == "error":
                errors.add(x[1])
    # the generator reaches the errors too, not only the happy path
    assert {"22004", "22023"} <= errors, errors


def test_the_edges_answer_alike(native, sql):
    with native.connect() as a, sql.connect() as b:
        for statement, args in EDGES:
            assert answer(a, statement, args) == answer(b, statement, args), (statement, args)


def test_the_downstream_presets_are_the_same_rows(native, sql):
    query = "SELECT * FROM webhook_dedup.downstream_key_limits ORDER BY 1"
    with native.connect() as a, sql.connect() as b:
        rows = answer(a, query)
        assert rows[0] == "rows" and len(rows[1]) >= 6
        assert answer(b, query) == rows
