"""What the SQL edition's hot paths must not do at each call (the profile
of docs/benchmarks.md, "The SQL edition"): call an SQL-language function
that the planner does not inline. PostgreSQL up to 17 parses and plans
such a function again at each statement that calls it (fmgr_sql: its
body read back from pg_proc and planned; 58 us a claim for one CASE on
15); one it inlines is part of its caller's plan and is never called.

The claims, completions, duplicates, conflicts and signed receives below
run ROUNDS times in one session with track_functions = 'all'; an SQL
function called at every call would count at least ROUNDS calls. (The
planner may still call an IMMUTABLE one while it builds one of the five
custom plans of a statement whose arguments it knows, constant-folding
it: a few calls, not one per round.)
"""

import json

ROUNDS = 30
SECRET = "s3cret"

# each round: a new key claimed and completed, its duplicate, a claim of
# a key held by a live lease, a conflicting payload, a signed GitHub
# delivery received twice (the second while the first holds it), a forged one
ROUND = [
    "SELECT outcome FROM webhook_dedup.webhook_claim('cost', 'k' || %(n)s, payload => 'a'::bytea, lease => '30 seconds')",
    "SELECT webhook_dedup.webhook_complete('cost', 'k' || %(n)s,"
    " (SELECT claim_token FROM webhook_dedup.keys WHERE source = 'cost' AND idem_key = 'k' || %(n)s),"
    " '{\"status\": 200}')",
    "SELECT outcome FROM webhook_dedup.webhook_claim('cost', 'k' || %(n)s, payload => 'a'::bytea, lease => '30 seconds')",
    "SELECT outcome FROM webhook_dedup.webhook_claim('cost', 'k' || %(n)s, payload => 'b'::bytea, lease => '30 seconds')",
    "SELECT outcome FROM webhook_dedup.webhook_claim('cost', 'held' || %(n)s, lease => '1 hour')",
    "SELECT outcome FROM webhook_dedup.webhook_claim('cost', 'held' || %(n)s, lease => '1 hour')",
    "SELECT outcome FROM webhook_dedup.webhook_receive('github', %(body)s,"
    " webhook_dedup.webhook_sign('github', %(body)s, %(secret)s) || %(headers)s::jsonb, ARRAY[%(secret)s], wait => '0')",
    "SELECT outcome FROM webhook_dedup.webhook_receive('github', %(body)s,"
    " webhook_dedup.webhook_sign('github', %(body)s, %(secret)s) || %(headers)s::jsonb, ARRAY[%(secret)s], wait => '0')",
    "SELECT reject_reason FROM webhook_dedup.webhook_receive('github', %(body)s,"
    " webhook_dedup.webhook_sign('github', %(body)s, 'forged') || %(headers)s::jsonb, ARRAY[%(secret)s], wait => '0')",
]

SQL_FUNCTION_CALLS = """
SELECT f.funcname, f.calls
  FROM pg_stat_user_functions AS f
  JOIN pg_proc AS p ON p.oid = f.funcid
 WHERE f.schemaname = 'webhook_dedup' AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'sql')
"""


def calls(conn) -> dict:
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return dict(conn.execute(SQL_FUNCTION_CALLS).fetchall())


def test_the_hot_paths_call_no_sql_function_the_planner_does_not_inline(sql):
    with sql.connect() as watcher, sql.connect() as conn:
        before = calls(watcher)
        conn.execute("SET track_functions = 'all'")
        for n in range(ROUNDS):
            body = json.dumps({"action": "opened", "n": n}).encode()
            headers = json.dumps({"X-GitHub-Delivery": f"cost-{n}", "X-GitHub-Event": "push"})
            args = {"n": str(n), "body": body, "secret": SECRET, "headers": headers}
            answers = [conn.execute(statement, args).fetchone()[0] for statement in ROUND]
            assert answers[:6] == ["claimed", True, "duplicate", "conflict", "claimed", "in_progress"], answers
            assert answers[6:] == ["claimed", "in_progress", "no_matching_signature"], answers
            # the control: an SQL function the planner cannot inline (a
            # STRICT set-returning one), called once a round
            conn.execute("SELECT count(*) FROM webhook_dedup.provider_profiles()")
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT 1")  # (a transaction's end flushes the session's counts)
        after = calls(watcher)
    per_call = {name: n - before.get(name, 0) for name, n in after.items() if n - before.get(name, 0) >= ROUNDS}
    assert per_call.pop("provider_profiles", 0) >= ROUNDS, f"the control was not counted: {per_call}"
    assert not per_call, f"SQL functions called at every call ({ROUNDS} rounds): {per_call}"
