"""Who may do what in the SQL edition, with real logins (issue 43; the
brief's rule: a caller without the documented role changes nothing). The
grants are the native edition's (one privileges.sql for both, compared by
test_schema.py); these check what they mean once the functions are
PL/pgSQL calling owner-only helpers: a receiver login claims, completes,
receives a delivery verified with a stored key and reads its answers
through the API; it cannot call a helper (the one that reads the stored
keys above all), read the keys, read or write the count log, or forge
counts through its session's setting; a login without the role changes
nothing.
"""

import json

import psycopg
import pytest

from editions import answer


@pytest.fixture(scope="module")
def logins(sql):
    with sql.connect() as conn:
        conn.execute("DROP ROLE IF EXISTS sqled_receiver")
        conn.execute("DROP ROLE IF EXISTS sqled_nobody")
        conn.execute("CREATE ROLE sqled_receiver LOGIN IN ROLE webhook_dedup_receiver")
        conn.execute("CREATE ROLE sqled_nobody LOGIN")
        conn.execute("DROP ROLE IF EXISTS sqled_reader")
        conn.execute("DROP ROLE IF EXISTS sqled_operator")
        conn.execute("CREATE ROLE sqled_reader LOGIN IN ROLE webhook_dedup_reader")
        conn.execute("CREATE ROLE sqled_operator LOGIN IN ROLE webhook_dedup_operator")
        conn.execute("DELETE FROM webhook_dedup.keys WHERE source IN ('priv', 'priv-gh')")
        conn.execute("DELETE FROM webhook_dedup.replay_guards WHERE source = 'priv-gh'")
        conn.execute("DELETE FROM webhook_dedup.source_secrets WHERE source = 'priv-gh'")
        conn.execute("SELECT webhook_dedup.add_secret('priv-gh', 'priv-secret', not_before => '2000-01-01')")
    yield
    with sql.connect() as conn:
        conn.execute("DELETE FROM webhook_dedup.keys WHERE source = 'priv'")
        conn.execute("DROP ROLE sqled_receiver")
        conn.execute("DROP ROLE sqled_nobody")
        conn.execute("DELETE FROM webhook_dedup.sources WHERE source = 'priv-op'")
        conn.execute("DROP ROLE sqled_reader")
        conn.execute("DROP ROLE sqled_operator")


def login(sql, user):
    return psycopg.connect(host=str(sql.dir), port=5432, user=user, dbname="postgres", autocommit=True)


def test_a_receiver_login_works_through_the_api_only(sql, logins):
    with login(sql, "sqled_receiver") as conn:
        claimed = answer(conn, "SELECT outcome, claim_token FROM webhook_dedup.webhook_claim('priv', 'priv:1')")
        assert claimed[0] == "rows" and claimed[1][0][0] == "claimed", claimed
        token = claimed[1][0][1]
        assert answer(conn, "SELECT webhook_dedup.webhook_complete('priv', 'priv:1', %s, '{\"ok\": 1}')", (token,)) \
            == ("rows", [(True,)])
        assert answer(conn, "SELECT outcome FROM webhook_dedup.webhook_claim('priv', 'priv:1')")[1] == [("duplicate",)]
        # a delivery verified with the source's stored key, which the
        # receiver cannot read itself
        body = b'{"n": 1}'
        got = answer(conn, "SELECT outcome, secret_index FROM webhook_dedup.webhook_receive('github', %s,"
                     " webhook_dedup.webhook_sign('github', %s, 'priv-secret') || '{\"X-GitHub-Delivery\": \"d1\"}',"
                     " source => 'priv-gh', wait => '0')", (body, body))
        assert got[0] == "rows" and got[1][0][0] == "claimed" and got[1][0][1] is not None, got
        # the edition's internals are the owner's (the stored keys above all)
        for statement in ("SELECT webhook_dedup._count('priv', NULL, 'first_claims', true)",
                          "SELECT * FROM webhook_dedup._stored_keys('priv-gh', 'github', now())",
                          "SELECT webhook_dedup._receive('github', ''::bytea, '{}', '{}', ARRAY['s'], 'priv-gh', NULL,"
                          " NULL, NULL, 'claim', NULL, false, NULL, now(), NULL, NULL, NULL, NULL, NULL, NULL, 0)",
                          "SELECT count(*) FROM webhook_dedup.source_secrets",
                          "SELECT * FROM webhook_dedup._claim('priv', 'priv:2', NULL, NULL, NULL, NULL)",
                          "SELECT count(*) FROM webhook_dedup._count_log",
                          "INSERT INTO webhook_dedup._count_log VALUES (now(), 'priv', NULL, 'first_claims', true, -5)",
                          "DELETE FROM webhook_dedup._count_log",
                          "SELECT webhook_dedup._flush_counts()"):
            assert answer(conn, statement)[:2] == ("error", "42501"), statement
        # the keys table itself is not the receiver's to change
        assert answer(conn, "UPDATE webhook_dedup.keys SET state = 'completed'")[:2] == ("error", "42501")


def test_a_forged_count_in_the_session_counts_nothing(sql, logins):
    # the waiting counts live in the session's own setting, which its role
    # may set: a forged entry (a negative count, a counter of its own, a
    # source of another) is dropped; only what _count could have made is kept
    with sql.connect() as admin:
        admin.execute("SELECT webhook_dedup.flush_metrics()")
        before = admin.execute("SELECT coalesce(sum(first_claims), 0) FROM webhook_dedup.claim_counts"
                               " WHERE source = 'victim'").fetchone()[0]
    with login(sql, "sqled_receiver") as conn:
        forged = ('{"since": 0, "n": {"[0, \\"victim\\", null, \\"first_claims\\", true]": -1000,'
                  ' "[0, \\"victim\\", null, \\"bogus\\", true]": 5}}')
        conn.execute("SELECT set_config('webhook_dedup.unwritten_counts', %s, false)", (forged,))
        # a claim that writes appends what waits
        assert answer(conn, "SELECT outcome FROM webhook_dedup.webhook_claim('priv', 'priv:3')")[1] == [("claimed",)]
    with sql.connect() as admin:
        admin.execute("SELECT webhook_dedup.flush_metrics()")
        after = admin.execute("SELECT coalesce(sum(first_claims), 0) FROM webhook_dedup.claim_counts"
                              " WHERE source = 'victim'").fetchone()[0]
        assert after == before
        assert admin.execute("SELECT count(*) FROM webhook_dedup._count_log WHERE n < 1").fetchone()[0] == 0


def test_a_login_without_the_role_changes_nothing(sql, logins):
    with login(sql, "sqled_nobody") as conn:
        for statement in ("SELECT * FROM webhook_dedup.webhook_claim('priv', 'priv:9')",
                          "SELECT webhook_dedup.webhook_forget('priv', 'priv:1')",
                          "SELECT webhook_dedup.webhook_resolve('priv', 'priv:1', 'failed')",
                          "SELECT * FROM webhook_dedup.run_maintenance()",
                          "SELECT webhook_dedup.add_secret('priv', 'abc')",
                          "SELECT * FROM webhook_dedup.webhook_receive('github', ''::bytea, '{}', ARRAY['s'])",
                          "SELECT webhook_dedup._count('priv', NULL, 'first_claims', true)"):
            assert answer(conn, statement)[:2] == ("error", "42501"), statement
    with sql.connect() as admin:
        assert admin.execute("SELECT state FROM webhook_dedup.keys WHERE idem_key = 'priv:1'").fetchone()[0] == "completed"
        assert admin.execute("SELECT count(*) FROM webhook_dedup.keys WHERE idem_key = 'priv:9'").fetchone()[0] == 0


def test_what_runs_as_its_caller_works_for_any_role(sql, logins):
    # verification, keys, signing and the answers change nothing and are
    # PUBLIC's in both editions: in this one they run as their caller over
    # the pure helpers (editions/sql/internal/privileges.sql)
    body = b'{"n": 1}'
    with login(sql, "sqled_nobody") as conn:
        signed = answer(conn, "SELECT webhook_dedup.webhook_sign('github', %s, 's')", (body,))
        assert signed[0] == "rows", signed
        headers = signed[1][0][0]
        for statement, args, expected in (
                ("SELECT webhook_dedup.webhook_verify('github', %s, %s::jsonb, ARRAY['s'])",
                 (body, json.dumps(headers)), True),
                ("SELECT valid FROM webhook_dedup.webhook_verify_detail('github', %s, %s::jsonb, ARRAY['s'])",
                 (body, json.dumps(headers)), True),
                ("SELECT webhook_dedup.webhook_verify_github(%s, %s, 's')", (body, headers["X-Hub-Signature-256"]), True),
                ("SELECT webhook_dedup.webhook_key('github', 'd1')", (), "github:d1"),
                ("SELECT webhook_dedup.webhook_body_key('zoom', %s) LIKE 'zoom:%%b%%'", (body,), True),
                ("SELECT length(webhook_dedup.webhook_operation_key('s', 'k', 'refund')) > 0", (), True),
                ("SELECT length(webhook_dedup.webhook_hmac(%s, 's'::bytea)) = 32", (body,), True),
                ("SELECT http_status FROM webhook_dedup.http_answer('duplicate', 'github')", (), 200)):
            got = answer(conn, statement, args)
            assert got == ("rows", [(expected,)]), (statement, got)
        # but not what reads or changes state
        assert answer(conn, "SELECT * FROM webhook_dedup.metrics_live()")[:2] == ("error", "42501")
        assert answer(conn, "SELECT * FROM webhook_dedup._logged_counts()")[:2] == ("error", "42501")


def test_a_reader_sees_the_live_metrics_and_an_operator_configures_sources(sql, logins):
    with login(sql, "sqled_receiver") as conn:
        assert answer(conn, "SELECT outcome FROM webhook_dedup.webhook_claim('priv', 'priv:live')")[1] == [("claimed",)]
    with login(sql, "sqled_reader") as conn:
        # the views over claim_counts add what the count log holds (metrics_live, as its caller)
        got = answer(conn, "SELECT sum(first_claims) FROM webhook_dedup.counters WHERE source = 'priv'")
        assert got[0] == "rows" and got[1][0][0] >= 1, got
        assert answer(conn, "SELECT count(*) > 0 FROM webhook_dedup.providers") == ("rows", [(True,)])
    with login(sql, "sqled_operator") as conn:
        # the intake columns are checked by source_intake_valid, as the operator
        got = answer(conn, "INSERT INTO webhook_dedup.sources (source, event_id_from) VALUES ('priv-op', 'header:X-Id')"
                           " RETURNING source")
        assert got == ("rows", [("priv-op",)]), got
        bad = answer(conn, "INSERT INTO webhook_dedup.sources (source, event_id_from) VALUES ('priv-op2', 'id')"
                           " RETURNING source")
        assert bad[:2] == ("error", "22023"), bad
