"""The claim state machine answers alike in both editions (issue 43,
item 6): random sequences of claims, completions, failures, lease expiry
(leases of a microsecond), duplicates, conflicts, checkpoints, operator
resolutions, forgets, enqueues and workers' takes run against both editions, one connection each;
every call's rows (or SQLSTATE, message and hint) and the final tables
must be equal, claim tokens and times normalised: a token by the order it
first appeared in, a time by whether it is set.

A sequence uses a few keys of two sources: "s" with the defaults, and "t"
with max_attempts 2 and keep_payload (the archive). Each step's choice of
token is the edition's own: the current holder's, an older one, a made-up
one, or NULL. WEBHOOK_DEDUP_DIFFERENTIAL_CASES bounds the sequences
(a tenth of it, 40 steps each); a difference found is kept in SEQUENCES.
"""

import datetime
import os
import random
import time
import uuid

from editions import answer

CASES = int(os.environ.get("WEBHOOK_DEDUP_DIFFERENTIAL_CASES", "1000"))
SEED = int(os.environ.get("WEBHOOK_DEDUP_DIFFERENTIAL_SEED", "43"))
STEPS = 40

KEYS = {"s": ["s:a", "s:b", "s:c"], "t": ["t:a", "t:b"]}
MADE_UP = uuid.UUID("00000000-0000-4000-8000-000000000000")


class Tokens:
    """One edition's claim tokens: each key's, in the order granted, and
    each token's ordinal across the sequence (what answers are compared by)."""

    def __init__(self):
        self.by_key: dict[tuple[str, str], list[uuid.UUID]] = {}
        self.ordinal: dict[uuid.UUID, int] = {}
        # the Retry-After of each answer that has one, in order: the time
        # left of a holder's lease counted from the clock of the call, so
        # compared apart, within the time each edition took (compare)
        self.retry_afters: list[int] = []

    def pick(self, key, choice):
        held = self.by_key.get(key, [])
        if choice == "current":
            return held[-1] if held else MADE_UP
        if choice == "stale":
            return held[-2] if len(held) > 1 else MADE_UP
        return MADE_UP if choice == "made_up" else None

    def normalise(self, value, key=None):
        if isinstance(value, uuid.UUID):
            if value == MADE_UP:
                return "made-up token"
            if value not in self.ordinal:
                self.ordinal[value] = len(self.ordinal)
                if key is not None:
                    self.by_key.setdefault(key, []).append(value)
            return f"token {self.ordinal[value]}"
        if isinstance(value, datetime.datetime):
            return "time"
        if isinstance(value, dict) and "Retry-After" in value:
            self.retry_afters.append(int(value["Retry-After"]))
            return {**value, "Retry-After": "seconds"}
        return value


def step(rng: random.Random):
    """One call: (statement, args, key or None, token choice or None)."""
    source = rng.choice(["s", "s", "t"])
    key = rng.choice(KEYS[source])
    token = rng.choice(["current", "current", "current", "stale", "made_up", None])
    kind = rng.choice(["claim"] * 6 + ["claim_many", "complete", "complete", "complete", "fail", "fail", "mark_unknown",
                                       "checkpoint", "extend", "resolve", "forget", "bad", "enqueue", "enqueue",
                                       "next", "next", "pause", "maintenance", "maintenance", "maintenance", "redrive", "redrive",
                                       "redact"]
                      + ["outbox"] * 6)
    lease = rng.choice([None, None, "1 microsecond", "1 microsecond", "1 hour", "0", "2 years", "1 mon"])
    if kind == "claim":
        return ("SELECT * FROM webhook_dedup.webhook_claim(%s, %s, %s, %s::interval, %s)",
                (source, key, rng.choice([None, b"a", b"a", b"b"]), lease, rng.choice([None, "push", "pull"])),
                (source, key), None)
    if kind == "claim_many":
        keys = rng.sample(KEYS[source], rng.randint(1, len(KEYS[source]))) + rng.choice([[], [key], [None]])
        return ("SELECT * FROM webhook_dedup.webhook_claim_many(%s, %s::text[], %s::interval, %s)",
                (source, keys, lease, rng.choice([None, "push"])), (source, None), None)
    if kind == "complete":
        return ("SELECT webhook_dedup.webhook_complete(%s, %s, %s, %s::jsonb)",
                (source, key, None, rng.choice([None, '{"ok": 1}'])), (source, key), token)
    if kind == "fail":
        return ("SELECT webhook_dedup.webhook_fail(%s, %s, %s, %s, retryable => %s, retry_after => %s::interval)",
                (source, key, None, rng.choice([None, "boom"]), rng.choice([True, True, False, None]),
                 rng.choice([None, "0", "0", "1 hour", "-1 second", "400 days"])), (source, key), token)
    if kind == "mark_unknown":
        return ("SELECT webhook_dedup.webhook_mark_unknown(%s, %s, %s, %s)",
                (source, key, None, rng.choice([None, "timeout"])), (source, key), token)
    if kind == "checkpoint":
        return ("SELECT webhook_dedup.webhook_checkpoint(%s, %s, %s, %s)",
                (source, key, None, rng.choice(["charged", "charged", "", None])), (source, key), token)
    if kind == "extend":
        return ("SELECT webhook_dedup.webhook_extend_lease(%s, %s, %s, %s::interval)",
                (source, key, None, rng.choice(["1 hour", "1 microsecond", None, "0"])), (source, key), token)
    if kind == "resolve":
        return ("SELECT webhook_dedup.webhook_resolve(%s, %s, %s, %s::jsonb)",
                (source, key, rng.choice(["completed", "failed", "dead_lettered", "pending", "processing", "nope",
                                          None]), rng.choice([None, '{"by": "operator"}'])), (source, key), None)
    if kind == "enqueue":
        return ("SELECT webhook_dedup.webhook_enqueue(%s, %s, %s, %s, %s::jsonb)",
                (source, key, rng.choice([b"a", b"a", b"b", None]), rng.choice([None, "push"]),
                 rng.choice([None, '{"x-id": ["1"]}'])), (source, key), None)
    if kind == "next":
        # Keys leased in one call (or swept in one maintenance pass) share
        # their due time, and which of them a take of fewer finds first is
        # the index's order (their heap positions), not a rule of either
        # edition: so a take asks for every key (5), and its rows are
        # compared in key order.
        next_lease = rng.choice([None, "1 microsecond", "1 hour", "0"])
        batch = rng.choice([5, 5, 5, 0, None])
        return ("SELECT * FROM webhook_dedup.webhook_next(%s, %s::interval, %s)",
                (rng.choice([None, None, "s", "t", ""]), next_lease, batch), ("*", None), None)
    if kind == "outbox":
        return outbox_step(rng, source, key, token)
    if kind == "redrive":
        # a bulk redrive (its keys moved by the next passes), a dry run, a
        # cancel, or a refusal
        if rng.random() < 0.3:
            return "SELECT webhook_dedup.cancel_redrive(%s)", (rng.choice([1, 1, 2, 9, None]),), None, None
        return ("SELECT * FROM webhook_dedup.redrive(%s, %s::text[], event_types => %s::text[], max => %s,"
                " dry_run => %s)",
                (rng.choice([source, source, None]),
                 rng.choice([["dead_lettered"], ["dead_lettered", "failed"], ["unknown_outcome", "conflict"],
                             ["conflict"], [], ["completed"], None]),
                 rng.choice([None, None, ["push"], [None]]), rng.choice([None, None, 1, 0]),
                 rng.choice([False, False, True, None])), None, None)
    if kind == "redact":
        return ("SELECT * FROM webhook_dedup.redact(%s, idem_key => %s, before => %s::timestamptz)",
                rng.choice([(source, key, None), (source, None, "infinity"), (source, key, "2000-01-01"),
                            (source, None, "2000-01-01")]), None, None)
    if kind == "maintenance":
        # a pass (leases of a microsecond are swept: attempts used, keys
        # failed or dead-lettered, intents taken back), or a flush (how
        # many rows it writes depends on the minutes the counts fall in, a
        # time: compared as whether it wrote any)
        return (rng.choice(["SELECT ran, leases_expired, dead_lettered, keys_pruned, keys_kept, history_pruned,"
                            " metrics_flushed > 0, more, errors, intents_expired, intents_pruned, keys_redriven"
                            " FROM webhook_dedup.run_maintenance()",
                            "SELECT webhook_dedup.flush_metrics() > 0"]), (), None, None)
    if kind == "pause":
        paused = rng.choice([source, source, None, ""])
        if rng.random() < 0.5:
            return "SELECT webhook_dedup.pause(%s, %s)", (paused, rng.choice([None, "deploy"])), None, None
        return "SELECT webhook_dedup.resume(%s)", (paused,), None, None
    if kind == "forget":
        return "SELECT webhook_dedup.webhook_forget(%s, %s)", (source, key), (source, key), None
    bad = rng.choice([(None, key), ("", key), (source, ""), (source, "k" * 256), ("(overflow)", key), (source, None)])
    return ("SELECT * FROM webhook_dedup.webhook_claim(%s, %s)", bad, None, None)


def outbox_step(rng, source, key, token):
    """One call of the outbox: a put under the key's lease (its token
    chosen as a claim's), a take, or a sender's call on intent 1 to 4 with
    its lease's token (chosen likewise: ("intent", id))."""
    kind = rng.choice(["put", "put", "claim_put", "claim_put", "next", "next", "ack", "fail", "unknown", "resolve",
                       "take_and"])
    if kind == "claim_put":
        # a claim and a put under its lease, as a handler does (only when
        # the claim leased the key: a statement that fails after counting a
        # claim is counted by the native edition, whose counters are not
        # transactional, and not by the SQL edition's, which are)
        return ("SELECT webhook_dedup.webhook_outbox_put(c.source, %s, c.claim_token, %s, %s, '{\"amount\": 2}',"
                " downstream_idempotent => %s) FROM (SELECT %s AS source, * FROM webhook_dedup.webhook_claim(%s, %s,"
                " lease => %s::interval)) AS c WHERE c.claim_token IS NOT NULL",
                (key, rng.choice(["refund", "email"]), rng.choice(["stripe", "mail"]), rng.choice([True, False]),
                 source, source, key, rng.choice(["1 hour", "1 microsecond"])), None, None)
    if kind == "take_and":
        # a sender's take and its answer in one statement
        answer_call = rng.choice(["webhook_dedup.webhook_outbox_ack(n.id, n.lease_token, '{\"id\": 7}')",
                                  "webhook_dedup.webhook_outbox_fail(n.id, n.lease_token, '503', retry_after => '0')",
                                  "webhook_dedup.webhook_outbox_fail(n.id, n.lease_token, '400', retryable => false)",
                                  "webhook_dedup.webhook_outbox_unknown(n.id, n.lease_token, 'timeout')"])
        return (f"SELECT n.id, {answer_call} FROM webhook_dedup.webhook_outbox_next(lease => %s::interval, batch => %s)"
                " AS n ORDER BY n.id", (rng.choice(["1 hour", "1 microsecond"]), 50), None, None)
    if kind == "put":
        return ("SELECT webhook_dedup.webhook_outbox_put(%s, %s, %s, %s, %s, %s::jsonb, max_length => %s,"
                " downstream => %s, downstream_idempotent => %s)",
                (source, key, None, rng.choice(["refund", "refund", "email", "", None]),
                 rng.choice(["stripe", "stripe", "mail", ""]), rng.choice(['{"amount": 1}', '{"amount": 1}', None]),
                 rng.choice([255, 255, 40, 31, None]), rng.choice([None, None, "stripe", "nope"]),
                 rng.choice([True, True, False, None])), (source, key), token)
    if kind == "next":
        next_lease = rng.choice([None, "1 microsecond", "1 hour"])
        batch = rng.choice([50, 50, 0])  # every intent (see webhook_next's step)
        return ("SELECT * FROM webhook_dedup.webhook_outbox_next(%s, %s::interval, %s)",
                (rng.choice([None, None, "stripe", "mail", ""]), next_lease, batch), ("*intent", None), None)
    intent = rng.choice([1, 1, 1, 2, 2, 3, None])
    if kind == "resolve":
        return ("SELECT webhook_dedup.webhook_outbox_resolve(%s, %s, %s::jsonb)",
                (intent, rng.choice(["completed", "failed", "dead_lettered", "pending", "processing", None]),
                 rng.choice([None, '{"ok": true}'])), None, None)
    chosen = ("intent", intent)
    if kind == "ack":
        return ("SELECT webhook_dedup.webhook_outbox_ack(%s, %s, %s::jsonb)",
                (intent, None, rng.choice([None, '{"id": "re_1"}'])), chosen, (token, 1))
    if kind == "fail":
        return ("SELECT webhook_dedup.webhook_outbox_fail(%s, %s, %s, retryable => %s, retry_after => %s::interval)",
                (intent, None, "503", rng.choice([True, True, False, None]), rng.choice([None, "0", "1 hour", "-1 s"])),
                chosen, (token, 1))
    return ("SELECT webhook_dedup.webhook_outbox_unknown(%s, %s, %s)", (intent, None, rng.choice([None, "timeout"])),
            chosen, (token, 1))


# The tables a sequence leaves, times and tokens normalised.
FINAL = [
    # (a swept lease's last_error names its expiry, a time: compared as "T")
    "SELECT source, idem_key, state, attempt, claim_token, fingerprint, event_type, result, last_step, redacted_by,"
    " regexp_replace(last_error, '[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}[+]00', 'T'),"
    " deliveries, conflicts, lease_expires_at IS NOT NULL, next_attempt_at IS NOT NULL, due_at IS NOT NULL,"
    " completed_at IS NOT NULL, expires_at IS NOT NULL, leased_at IS NOT NULL FROM webhook_dedup.keys ORDER BY 1, 2",
    "SELECT source, idem_key, stored_fingerprint, fingerprint, via FROM webhook_dedup.conflict_log ORDER BY 1, 2, seen_at",
    "SELECT source, idem_key, conflict, payload, event_type FROM webhook_dedup.archive ORDER BY 1, 2, received_at",
    "SELECT source, idem_key, payload, headers FROM webhook_dedup.payloads ORDER BY 1, 2",
    "SELECT source, max_attempts, keep_payload, paused_at IS NOT NULL, paused_by, pause_reason FROM webhook_dedup.sources"
    " ORDER BY 1",
    "SELECT id, source, idem_key, operation, target, request, downstream_key, downstream_idempotent, key_attempt, state,"
    " attempt, lease_token, response, last_error, lease_expires_at IS NOT NULL, next_attempt_at IS NOT NULL,"
    " due_at IS NOT NULL, due_at = 'infinity',"
    " delivered_at IS NOT NULL FROM webhook_dedup.outbox ORDER BY id",
    "SELECT id, source, states, conflicts, event_types, max_keys, created_by, status, matched, moved, skipped,"
    " finished_at IS NOT NULL, cancelled_by FROM webhook_dedup.redrives ORDER BY id",
    "SELECT run, n, idem_key, conflict_at IS NOT NULL, outcome FROM webhook_dedup.redrive_keys ORDER BY run, n",
    # every count, flushed first (by hour and by minute, across buckets: a
    # sequence may cross an hour between the editions)
    "SELECT bucket_width, source, event_type, sum(deliveries), sum(first_claims), sum(reclaims),"
    " sum(duplicates_of_completed), sum(duplicates_in_progress), sum(conflicts), sum(retry_later),"
    " sum(unknown_outcome), sum(dead_lettered), sum(completions), sum(stale_completions), sum(retries_scheduled),"
    " sum(dead_letters), sum(marked_unknown), sum(enqueued), sum(drained), sum(forgotten), sum(resolved),"
    " sum(stale_tokens), sum(expired_leases), sum(intents_written), sum(intents_delivered), sum(intent_retries),"
    " sum(intents_dead_lettered), sum(intents_unknown), sum(intent_leases_expired)"
    " FROM webhook_dedup.claim_counts, LATERAL (SELECT webhook_dedup.flush_metrics()) AS flushed"
    " GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
]

RESET = ["SELECT webhook_dedup.flush_metrics()", "DELETE FROM webhook_dedup.claim_counts",
         "DELETE FROM webhook_dedup.maintenance_runs", "DELETE FROM webhook_dedup.keys", "DELETE FROM webhook_dedup.payloads", "DELETE FROM webhook_dedup.conflict_log", "DELETE FROM webhook_dedup.archive",
         "DELETE FROM webhook_dedup.sources", "DELETE FROM webhook_dedup.outbox",
         "SELECT setval(pg_get_serial_sequence('webhook_dedup.outbox', 'id'), 1, false)",
         "DELETE FROM webhook_dedup.redrive_keys", "DELETE FROM webhook_dedup.redrives",
         "SELECT setval(pg_get_serial_sequence('webhook_dedup.redrives', 'id'), 1, false)",
         "INSERT INTO webhook_dedup.sources (source, max_attempts, keep_payload) VALUES ('t', 2, true)"]


def run(conn, tokens: Tokens, calls, final_queries=None):
    answers = []
    for statement, args, key, choice in calls:
        if choice is not None:
            # the token goes third, or where the step says
            choice, at = choice if isinstance(choice, tuple) else (choice, 2)
            args = (*args[:at], tokens.pick(key, choice), *args[at + 1:])
        got = answer(conn, statement, args)
        if got[0] == "rows":
            rows = []
            for row in sorted(got[1], key=lambda r: (r[0], r[1])) if key is not None and key[0].startswith("*") else got[1]:
                # webhook_claim_many names its key first, webhook_next its source and key
                if key is not None and key[0] == "*intent":
                    row_key = ("intent", row[0])
                elif key is not None and key[0] == "*":
                    row_key = (row[0], row[1])
                elif key is not None and key[1] is None:
                    row_key = (key[0], row[0])
                else:
                    row_key = key
                rows.append(tuple(tokens.normalise(v, row_key) for v in row))
            got = ("rows", rows)
        answers.append(got)
    final = []
    for query in final_queries or FINAL:
        rows = conn.execute(query).fetchall()
        final.append([tuple(tokens.normalise(v) for v in row) for row in rows])
    return answers, final


def compare(native, sql, calls, label, reset=None, final_queries=None):
    """Run `calls` on both editions from the state `reset` leaves (RESET by
    default); every answer and the tables of `final_queries` (FINAL) must
    be equal. Returns the native edition's answers and tables."""
    final_queries = final_queries or FINAL
    with native.connect() as a, sql.connect() as b:
        for conn in (a, b):
            for statement in reset or RESET:
                conn.execute(statement)
        logged = (native.log_size(), sql.log_size())
        x_tokens, y_tokens = Tokens(), Tokens()
        started = time.monotonic()
        x_answers, x_final = run(a, x_tokens, calls, final_queries)
        middle = time.monotonic()
        y_answers, y_final = run(b, y_tokens, calls, final_queries)
        took_s = max(middle - started, time.monotonic() - middle)
    for (statement, args, _, choice), x, y in zip(calls, x_answers, y_answers):
        assert x == y, (f"{label}: {statement} {args!r} (token: {choice}):\n  native: {x}\n  SQL edition: {y}\n"
                        f"  the native server's autovacuum and lock lines meanwhile:\n    {native.log_since(logged[0])}\n"
                        f"  the SQL edition's:\n    {sql.log_since(logged[1])}")
    # A Retry-After is the time left of a lease granted earlier in the
    # sequence, rounded up (answer.rs, seconds_until), on each edition's
    # own clock: each lies within the time its edition took for the whole
    # sequence below the lease, so the two differ by at most that, and one
    # (the rounding itself: test_receive_wait.py, a lease of 300.9 s).
    assert len(x_tokens.retry_afters) == len(y_tokens.retry_afters), label
    for x, y in zip(x_tokens.retry_afters, y_tokens.retry_afters):
        assert x >= 1 and y >= 1 and abs(x - y) <= took_s + 1, \
            f"{label}: Retry-After {x} (native) against {y} (SQL edition) after {took_s:.1f} s"
    for query, x, y in zip(final_queries, x_final, y_final):
        assert x == y, f"{label}: the tables differ after the sequence: {query}\n  native: {x}\n  SQL edition: {y}"
    return x_answers, x_final


def test_generated_claim_sequences_answer_alike(native, sql):
    outcomes, errors, intents, redriven = set(), set(), set(), set()
    for n in range(max(CASES // 10, 20)):
        rng = random.Random(f"{SEED}-claims-{n}")
        calls = [step(rng) for _ in range(STEPS)]
        answers, final = compare(native, sql, calls, f"sequence {n}")
        outcomes.update(row[2] for row in final[0])  # the keys' states left
        intents.update(row[9] for row in final[5])  # the outbox intents' states
        redriven.update(row[4] for row in final[7])  # the redriven keys' outcomes
        for got in answers:
            if got[0] == "error":
                errors.add(got[1])
            else:
                outcomes.update(v for row in got[1] for v in row if isinstance(v, str))
    # the sequences reach every outcome and state, and the errors
    assert {"claimed", "reclaimed", "in_progress", "duplicate", "conflict", "retry_later", "unknown_outcome",
            "dead_lettered", "failed", "completed", "pending", "accepted"} <= outcomes, outcomes
    assert {"22004", "22023", "P0002"} <= errors, errors
    assert {"pending", "processing", "completed", "failed", "dead_lettered", "unknown_outcome"} <= intents, intents
    assert redriven, "redrives matched keys"  # (the scenario below moves them)


def ordering_step(rng: random.Random):
    """One call of the ordering functions: webhook_advance on a few
    entities, or an UPSERT into a table guarded by webhook_monotonic_guard."""
    at = rng.choice(["2026-01-01 00:00:0%d+00" % rng.randint(0, 5), "infinity", None])
    if rng.random() < 0.6:
        return ("SELECT webhook_dedup.webhook_advance(%s, %s, %s::timestamptz, event_id => %s, sequence => %s)",
                (rng.choice(["s", "s", "", None, "x" * 256]), rng.choice(["e1", "e2", "", None]), at,
                 rng.choice([None, "ev1", "ev2"]), rng.choice([None, 1, 2, 3])))
    return ("INSERT INTO guarded AS g (id, updated_at, note) VALUES (%s, %s::timestamp, %s)"
            " ON CONFLICT (id) DO UPDATE SET updated_at = EXCLUDED.updated_at, note = EXCLUDED.note RETURNING note",
            (rng.choice([1, 2]), None if at is None or rng.random() < 0.1 else at.replace("+00", ""),
             rng.choice(["a", "b", "c"])))


GUARDS = [
    # each (trigger definition, whether it is a working guard)
    ("CREATE TRIGGER g BEFORE INSERT OR UPDATE ON guarded FOR EACH ROW"
     " EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('updated_at')", True),
    ("CREATE TRIGGER g BEFORE UPDATE ON guarded FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard()",
     False),
    ("CREATE TRIGGER g BEFORE UPDATE ON guarded FOR EACH ROW"
     " EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('note')", False),
    ("CREATE TRIGGER g BEFORE UPDATE ON guarded FOR EACH ROW"
     " EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('nope')", False),
    ("CREATE TRIGGER g AFTER UPDATE ON guarded FOR EACH ROW"
     " EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('updated_at')", False),
    ("CREATE TRIGGER g BEFORE DELETE ON guarded FOR EACH ROW"
     " EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('updated_at')", False),
    ("CREATE TRIGGER g BEFORE UPDATE ON guarded FOR EACH STATEMENT"
     " EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('updated_at')", False),
]


def test_ordering_answers_alike(native, sql):
    # webhook_advance's answers and watermarks, and a guarded table's rows
    # under each trigger definition (working, or refused with its SQLSTATE)
    rng = random.Random(f"{SEED}-ordering")
    seen = set()
    with native.connect() as a, sql.connect() as b:
        for definition, _ in GUARDS:
            for conn in (a, b):
                conn.execute("DROP TABLE IF EXISTS guarded")
                conn.execute("CREATE TABLE guarded (id int PRIMARY KEY, updated_at timestamp, note text)")
                conn.execute(definition)
                conn.execute("DELETE FROM webhook_dedup.watermarks")
            for _ in range(max(CASES // 20, 40)):
                statement, args = ordering_step(rng)
                x, y = answer(a, statement, args), answer(b, statement, args)
                assert x == y, f"{definition}\n{statement} {args!r}:\n  native: {x}\n  SQL edition: {y}"
                seen.add(x[1] if x[0] == "error" else "rows")
            if "DELETE" in definition:
                x, y = answer(a, "DELETE FROM guarded"), answer(b, "DELETE FROM guarded")
                assert x == y and x[0] == "error", (x, y)
            for query in ("SELECT * FROM guarded ORDER BY 1",
                          "SELECT source, entity_id, source_updated_at, event_id, sequence FROM webhook_dedup.watermarks"
                          " ORDER BY 1, 2"):
                assert answer(a, query) == answer(b, query), (definition, query)
    assert {"rows", "22004", "22023", "39P01", "42703", "42804"} <= seen, seen


def test_a_bulk_redrive_and_redaction_act_alike(native, sql):
    # a fixed sequence: an enqueued key and a claimed one dead-lettered, a
    # claimed key of a source that archives, a conflicting delivery of a
    # completed key, then a redrive of each kind, passes that move them, a
    # cancel
    def call(statement, *args):
        return (statement, args, None, None)
    calls = [
        call("SELECT webhook_dedup.webhook_enqueue('s', 's:a', 'body a')"),
        call("SELECT webhook_dedup.webhook_resolve('s', 's:a', 'dead_lettered')"),
        call("SELECT outcome FROM webhook_dedup.webhook_claim('s', 's:b')"),
        call("SELECT webhook_dedup.webhook_resolve('s', 's:b', 'dead_lettered')"),
        call("SELECT outcome FROM webhook_dedup.webhook_claim('t', 't:a', 'first'::bytea)"),
        call("SELECT webhook_dedup.webhook_resolve('t', 't:a', 'dead_lettered')"),
        call("SELECT outcome FROM webhook_dedup.webhook_claim('t', 't:b', 'one'::bytea)"),
        call("SELECT webhook_dedup.webhook_resolve('t', 't:b', 'completed')"),
        call("SELECT outcome FROM webhook_dedup.webhook_claim('t', 't:b', 'another'::bytea)"),
        call("SELECT * FROM webhook_dedup.redrive('s', dry_run => true)"),
        call("SELECT * FROM webhook_dedup.redrive('s')"),
        call("SELECT * FROM webhook_dedup.redrive('t', ARRAY['dead_lettered', 'conflict'])"),
        call("SELECT ran, keys_redriven, errors FROM webhook_dedup.run_maintenance()"),
        call("SELECT * FROM webhook_dedup.redrive('t', ARRAY['failed'], max => 1)"),
        call("SELECT webhook_dedup.cancel_redrive(3)"),
        call("SELECT webhook_dedup.cancel_redrive(1)"),
        call("SELECT ran, keys_redriven, errors FROM webhook_dedup.run_maintenance()"),
        call("SELECT source, idem_key, attempt, payload FROM webhook_dedup.webhook_next(batch => 10) ORDER BY 1, 2"),
        # then erasure: of a key, of an account's keys, of everything before now
        call("SELECT outcome FROM webhook_dedup.webhook_claim('s', webhook_dedup.webhook_key('s', 'e1', account => 'acme'),"
             " 'personal'::bytea)"),
        call("SELECT * FROM webhook_dedup.redact('t', idem_key => 't:b')"),
        call("SELECT * FROM webhook_dedup.redact('s', account => 'acme')"),
        call("SELECT * FROM webhook_dedup.redact('s', account => '')"),
        call("SELECT * FROM webhook_dedup.redact('s')"),
        call("SELECT * FROM webhook_dedup.redact('t', before => 'infinity')"),
        call("SELECT * FROM webhook_dedup.redact('t', before => now())"),
        call("SELECT * FROM webhook_dedup.redact('t', idem_key => 't:a', account => 'x')"),
        call("SELECT ran, keys_redriven, errors FROM webhook_dedup.run_maintenance()"),
    ]
    answers, final = compare(native, sql, calls, "the redrive scenario")
    outcomes = {row[4] for row in final[7]}
    assert {"moved", "no_payload"} <= outcomes, (outcomes, answers)
