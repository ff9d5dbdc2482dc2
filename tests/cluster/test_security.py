"""The security faults that need a real cluster, real roles or more than
one session: a database owner's `search_path` trap against every function
and the background worker, databases in other encodings, and hostile input
(a million headers, a 100 MB body) that must stay cancellable.

The single-session cases (settings' bounds, replay windows) are pg_tests in
src/tests/security.rs.
"""

import os
import re
import threading
import time

import psycopg
import pytest
from psycopg.types.json import Jsonb

from edition import EDITION, native_only, register_sql_edition, sql_edition_bin
from own_cluster import OwnCluster, wait_for

OWNER = "victim_owner"

# The attacker's objects: operators and aggregates a statement picks up when
# it names them without a schema and the database's search_path puts the
# attacker's schema first. Each logs its call and tries to make the attacker
# superuser: it succeeds only when a superuser session calls it.
TRAP = f"""
CREATE SCHEMA evil;
CREATE TABLE evil.calls (fn text, by_role text, at timestamptz DEFAULT pg_catalog.clock_timestamp());
GRANT USAGE ON SCHEMA evil TO PUBLIC;
GRANT INSERT, SELECT ON evil.calls TO PUBLIC;
CREATE FUNCTION evil.log(fn text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO evil.calls (fn, by_role) VALUES (fn, current_user);
  BEGIN
    EXECUTE 'ALTER ROLE {OWNER} SUPERUSER';
  EXCEPTION WHEN insufficient_privilege THEN NULL;
  END;
END $$;
"""

# (operator, left type, right type, the pg_catalog operator it imitates)
OPERATORS = [
    ("=", "name", "name"), ("=", "text", "text"), ("<>", "text", "text"), ("||", "text", "text"),
    ("=", "uuid", "uuid"), ("+", "integer", "integer"), ("<=", "timestamptz", "timestamptz"),
    ("<", "timestamptz", "timestamptz"), ("=", "tid", "tid"), ("-", "timestamptz", "interval"),
    ("+", "timestamptz", "interval"), ("=", "interval", "interval"), (">", "timestamptz", "timestamptz"),
    (">=", "timestamptz", "timestamptz"), ("+", "bigint", "bigint"), ("=", "bigint", "bigint"),
    ("=", "bytea", "bytea"), ("<>", "name", "name"), ("=", "oid", "oid"), ("=", "boolean", "boolean"),
]


def trap_sql():
    parts = [TRAP]
    for i, (op, left, right) in enumerate(OPERATORS):
        result = "boolean" if op in ("=", "<>", "<=", "<", ">", ">=") else {"||": "text", "+": left, "-": left}[op]
        parts.append(f"""
CREATE FUNCTION evil.op{i}(a {left}, b {right}) RETURNS {result} LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.log('{op}({left},{right})'); RETURN a OPERATOR(pg_catalog.{op}) b; END $$;
CREATE OPERATOR evil.{op} (LEFTARG = {left}, RIGHTARG = {right}, FUNCTION = evil.op{i});
""")
    parts.append("""
CREATE FUNCTION evil.min_step(s interval, v interval) RETURNS interval LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.log('min(interval)'); RETURN CASE WHEN s IS NULL OR v OPERATOR(pg_catalog.<) s THEN v ELSE s END; END $$;
CREATE AGGREGATE evil.min(interval) (SFUNC = evil.min_step, STYPE = interval);
CREATE FUNCTION evil.agg_step(s text, v text, d text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.log('string_agg(text,text)'); RETURN pg_catalog.concat(s, d, v); END $$;
CREATE AGGREGATE evil.string_agg(text, text) (SFUNC = evil.agg_step, STYPE = text);
CREATE FUNCTION evil.count_step(s bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.log('count(*)'); RETURN s OPERATOR(pg_catalog.+) 1; END $$;
CREATE AGGREGATE evil.count(*) (SFUNC = evil.count_step, STYPE = bigint, INITCOND = '0');
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.log('now()'); RETURN pg_catalog.now(); END $$;
CREATE FUNCTION evil.current_setting(text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.log('current_setting(text)'); RETURN pg_catalog.current_setting($1); END $$;
""")
    return "\n".join(parts)


# One call of every function of the extension, as a superuser would make
# it (pg_cron, an operator's psql); test_every_function_is_called checks the
# list against the catalog. The calls themselves name nothing the trap
# could catch ({token:k} is replaced by key k's claim token, read with a
# qualified query).
CALLS = [
    "SELECT webhook_dedup.webhook_verify('github', 'x'::bytea, '{\"X-Hub-Signature-256\": \"sha256=00\"}', ARRAY['s'])",
    "SELECT * FROM webhook_dedup.webhook_verify_detail('stripe', 'x'::bytea, webhook_dedup.webhook_sign('stripe', 'x'::bytea, 's'), ARRAY['s'])",
    "SELECT webhook_dedup.webhook_verify_github('x'::bytea, 'sha256=00', 's')",
    "SELECT webhook_dedup.webhook_verify_stripe('x'::bytea, 't=1,v1=00', 's')",
    "SELECT webhook_dedup.webhook_verify_shopify('x'::bytea, 'AA==', 's')",
    "SELECT webhook_dedup.webhook_verify_slack('x'::bytea, '1', 'v0=00', 's')",
    "SELECT webhook_dedup.webhook_verify_standard('x'::bytea, 'm', '1', 'v1,AA==', 'whsec_AAEC')",
    "SELECT webhook_dedup.webhook_verify_paddle('x'::bytea, 'ts=1;h1=00', 's')",
    "SELECT webhook_dedup.webhook_verify_twilio('https://h/x', 'a=1'::bytea, 'AA==', 's')",
    "SELECT webhook_dedup.webhook_hmac('x'::bytea, 's'::bytea)",
    "SELECT webhook_dedup.webhook_sign('standard', 'x'::bytea, 'whsec_AAEC', msg_id => 'm')",
    "SELECT webhook_dedup.webhook_key('src', 'id')",
    "SELECT webhook_dedup.webhook_body_key('src', 'x'::bytea)",
    "SELECT * FROM webhook_dedup.http_answer('in_progress', 'github', retry_after => '1 s')",
    "SELECT * FROM webhook_dedup.webhook_receive('stripe', '{\"id\":\"evt_1\",\"type\":\"t\",\"created\":1}'::bytea,"
    " webhook_dedup.webhook_sign('stripe', '{\"id\":\"evt_1\",\"type\":\"t\",\"created\":1}'::bytea, 's'), ARRAY['s'])",
    "SELECT * FROM webhook_dedup.webhook_claim('s', 'k1', 'p'::bytea, lease => '1 second')",
    "SELECT * FROM webhook_dedup.webhook_claim('s', 'k1', 'q'::bytea)",  # a conflict
    "SELECT * FROM webhook_dedup.webhook_claim_many('s', ARRAY['m1', 'm2'])",
    "SELECT webhook_dedup.webhook_complete('s', 'm1', {token:m1}, '{}')",
    "SELECT * FROM webhook_dedup.webhook_claim('s', 'm1')",  # a duplicate
    "SELECT webhook_dedup.webhook_checkpoint('s', 'm2', {token:m2}, 'a')",
    "SELECT webhook_dedup.webhook_extend_lease('s', 'm2', {token:m2},"
    " '1 minute')",
    "SELECT webhook_dedup.webhook_fail('s', 'm2', {token:m2}, 'e')",
    "SELECT * FROM webhook_dedup.webhook_claim('s', 'u1')",
    "SELECT webhook_dedup.webhook_mark_unknown('s', 'u1', {token:u1})",
    "SELECT webhook_dedup.webhook_resolve('s', 'u1', 'completed')",
    "SELECT webhook_dedup.webhook_forget('s', 'u1')",
    "SELECT * FROM webhook_dedup.webhook_enqueue('s', 'q1', 'p'::bytea)",
    "SELECT * FROM webhook_dedup.webhook_next('s')",
    # a pause: keys parked, one parked by webhook_next, all given back
    "SELECT webhook_dedup.pause('s', 'downstream down')",
    "SELECT * FROM webhook_dedup.webhook_enqueue('s', 'q2', 'p'::bytea)",
    "SELECT * FROM webhook_dedup.webhook_next('s')",
    "SELECT webhook_dedup.resume('s')",
    # the outbox: intents written by a key's holder, taken, acknowledged,
    # failed, marked unknown and resolved; downstream keys
    "SELECT * FROM webhook_dedup.webhook_claim('s', 'o1', lease => '1 hour')",
    "SELECT webhook_dedup.webhook_outbox_put('s', 'o1', {token:o1}, 'refund', 'pay', '{}')",
    "SELECT webhook_dedup.webhook_outbox_put('s', 'o1', {token:o1}, 'refund', 'pay', '{}')",  # the same operation
    "SELECT webhook_dedup.webhook_outbox_put('s', 'o1', {token:o1}, 'mail', 'mail', '{}', downstream => 'stripe',"
    " downstream_idempotent => false)",
    "SELECT webhook_dedup.webhook_outbox_put('s', 'o1', {token:o1}, 'ship', 'ship', '{}', max_length => 40)",
    "SELECT webhook_dedup.webhook_operation_key('s', 'o1', 'refund', downstream => 'adyen')",
    "SELECT * FROM webhook_dedup.downstream_key_limits_rows()",
    "SELECT * FROM webhook_dedup.webhook_outbox_next('pay', lease => '1 minute')",
    "SELECT webhook_dedup.webhook_outbox_ack({intent:pay}, '{}')",
    "SELECT * FROM webhook_dedup.webhook_outbox_next('mail')",
    "SELECT webhook_dedup.webhook_outbox_unknown({intent:mail}, 'timeout')",
    "SELECT * FROM webhook_dedup.webhook_outbox_next(batch => 5)",
    "SELECT webhook_dedup.webhook_outbox_fail({intent:ship}, 'e', retryable => false)",
    "SELECT webhook_dedup.webhook_outbox_resolve((SELECT o.id FROM webhook_dedup.outbox AS o"
    " WHERE o.state OPERATOR(pg_catalog.=) 'unknown_outcome'), 'completed')",
    "SELECT * FROM webhook_dedup.webhook_advance('s', 'e1', pg_catalog.now())",
    "INSERT INTO guarded VALUES (1, pg_catalog.now()) ON CONFLICT (id) DO UPDATE SET at = EXCLUDED.at",  # the guard
    # the payload archive: a first delivery and a conflict archived (a pass
    # makes the day partitions), then erased by each scope; reconciliation
    "INSERT INTO webhook_dedup.sources (source, keep_payload, payload_retention) VALUES ('a', true, '1 hour')"
    " ON CONFLICT (source) DO NOTHING",
    "SELECT * FROM webhook_dedup.webhook_claim('a', 'a1', 'p'::bytea)",
    "SELECT * FROM webhook_dedup.run_maintenance()",
    "SELECT * FROM webhook_dedup.webhook_claim('a', 'a1', 'q'::bytea)",
    "SELECT * FROM webhook_dedup.webhook_enqueue('a', 'a2', 'p'::bytea)",
    "SELECT * FROM webhook_dedup.redact('a', idem_key => 'a1')",
    "SELECT * FROM webhook_dedup.redact('a', account => 'acct')",
    "SELECT * FROM webhook_dedup.redact('a', before => pg_catalog.now())",
    # the redactions made final: every table they erased from rewritten (in
    # the pass without the pin, all in one transaction, the redactions are
    # this transaction's own: 55000 after the function's first statements)
    "DO $$ BEGIN PERFORM webhook_dedup.purge_redactions(include_keys => true);"
    " EXCEPTION WHEN object_not_in_prerequisite_state THEN NULL; END $$",
    "SELECT * FROM webhook_dedup.unseen('a', ARRAY['a1', 'a9'])",
    "SELECT * FROM webhook_dedup.source_node('a')",
    "SELECT webhook_dedup.reconcile('a', 'a9', 'p'::bytea, event_type => 't')",
    # export and bulk redrive: a dead letter with its archived payload,
    # counted, redriven (the pass moves it), a second run cancelled
    "SELECT * FROM webhook_dedup.webhook_claim('a', 'a3', 'p'::bytea)",
    "SELECT webhook_dedup.webhook_fail('a', 'a3', {token:a3}, 'e', retryable => false)",
    "SELECT * FROM webhook_dedup.export_deliveries('a', pg_catalog.now() OPERATOR(pg_catalog.-) '1 day'::interval,"
    " pg_catalog.clock_timestamp(), include_conflicts => true)",
    "SELECT * FROM webhook_dedup.redrive('a', dry_run => true)",
    "SELECT * FROM webhook_dedup.redrive('a', ARRAY['dead_lettered', 'conflict'])",
    "SELECT * FROM webhook_dedup.run_maintenance()",
    "SELECT webhook_dedup.cancel_redrive((SELECT pg_catalog.max(r.id) FROM webhook_dedup.redrives AS r))",
    "SELECT * FROM webhook_dedup.run_maintenance()",
    "SELECT webhook_dedup.flush_metrics()",
    "SELECT * FROM webhook_dedup.metrics_live()",
    "SELECT * FROM webhook_dedup.metrics_live_cluster()",
    "SELECT webhook_dedup.source_has_history('github')",
    "SELECT webhook_dedup.default_retention()",
    "SELECT * FROM webhook_dedup.provider_profiles()",
    "SELECT * FROM webhook_dedup.duplicate_rate_alerts()",
    "INSERT INTO webhook_dedup.sources (source, retention) VALUES ('t', '1 day')",  # the sources trigger
    # the replay guard: a body, then the same body under another delivery id
    "SELECT * FROM webhook_dedup.webhook_receive('github', '{\"zen\":1}'::bytea, webhook_dedup.webhook_sign('github', '{\"zen\":1}'::bytea, 's')"
    " OPERATOR(pg_catalog.||) '{\"X-GitHub-Delivery\": \"g1\"}', ARRAY['s'])",
    "SELECT * FROM webhook_dedup.webhook_receive('github', '{\"zen\":1}'::bytea, webhook_dedup.webhook_sign('github', '{\"zen\":1}'::bytea, 's')"
    " OPERATOR(pg_catalog.||) '{\"X-GitHub-Delivery\": \"g2\"}', ARRAY['s'])",
    # a custom source (its intake checked by source_intake_valid), and its filter
    "INSERT INTO webhook_dedup.sources (source, event_id_from, fingerprint_pointers, accept_event_types)"
    " VALUES ('c', 'header:x-id', ARRAY['/a'], ARRAY['t*']) ON CONFLICT (source) DO NOTHING",
    "SELECT * FROM webhook_dedup.webhook_receive('hmac', 'x'::bytea, webhook_dedup.webhook_sign('hmac', 'x'::bytea, 's', signature_header => 'x-sig')"
    " OPERATOR(pg_catalog.||) '{\"x-id\": \"c1\"}', ARRAY['s'], source => 'c', signature_header => 'x-sig')",
    "SELECT webhook_dedup.source_intake_valid('v', 'header:x-id', '/kind', '/at', 'rfc3339', ARRAY['/d'], ARRAY['a*'])",
    # verification keys in the database, and a delivery verified with them
    "SELECT webhook_dedup.add_secret('stored', 's', pg_catalog.now() OPERATOR(pg_catalog.-) '1 hour'::interval)",
    "SELECT * FROM webhook_dedup.webhook_receive('github', '{\"zen\":2}'::bytea, webhook_dedup.webhook_sign('github', '{\"zen\":2}'::bytea, 's')"
    " OPERATOR(pg_catalog.||) '{\"X-GitHub-Delivery\": \"s1\"}', source => 'stored')",
    "SELECT * FROM webhook_dedup.list_secrets('stored')",
    "SELECT webhook_dedup.retire_secret('stored', (SELECT pg_catalog.max(l.id) FROM webhook_dedup.list_secrets('stored') AS l))",
    "SELECT webhook_dedup.dump_secrets(false)",
    # the distributed mode needs Citus, which this cluster has not: 55000
    # after its first check (tests/citus runs the rest)
    "DO $$ BEGIN PERFORM webhook_dedup.distribute();"
    " EXCEPTION WHEN object_not_in_prerequisite_state THEN NULL; END $$",
]

VIEWS = ["counters", "metrics_buckets", "duplicate_metrics", "duplicate_metrics_by_minute", "providers",
         "retention_warnings", "key_states", "stuck_claims", "dead_letters", "unknown_outcomes", "conflicts",
         "key_history", "lapsed_leases", "queue_backlog", "outbox_backlog", "outbox_dead_letters",
         "outbox_unknown_outcomes", "downstream_key_limits", "redrive_runs"]


@pytest.fixture(scope="module")
def attacked():
    """A cluster whose worker runs in database `victim`, owned by a role
    that is not superuser and has set the trap above."""
    c = OwnCluster({"webhook_dedup.database": "'victim'", "webhook_dedup.maintenance_interval": "1"})
    try:
        with c.connect() as conn:
            conn.execute(f"CREATE ROLE {OWNER} LOGIN")
            conn.execute(f"CREATE DATABASE victim OWNER {OWNER}")
        with c.connect("victim") as conn:
            conn.execute("CREATE EXTENSION webhook_dedup")
            conn.execute("CREATE TABLE guarded (id int PRIMARY KEY, at timestamptz)")
            conn.execute("CREATE TRIGGER g BEFORE INSERT OR UPDATE ON guarded FOR EACH ROW"
                         " EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('at')")
        with psycopg.connect(host=str(c.dir), port=5432, user=OWNER, dbname="victim", autocommit=True) as conn:
            conn.execute(trap_sql())
            conn.execute("ALTER DATABASE victim SET search_path = evil, pg_catalog, public")
        yield c
    finally:
        c.destroy()


def safe_connect(cluster):
    """A superuser session of `victim` that overrides the trapped
    search_path, for the tests' own statements around the calls."""
    return psycopg.connect(host=str(cluster.dir), port=5432, user="postgres", dbname="victim", autocommit=True,
                           options="-c search_path=pg_catalog,public")


def intent(conn, target):
    """The id and lease token of the intent of `target` a sender holds, as
    SQL literals."""
    (id_, tok) = conn.execute("SELECT o.id, o.lease_token FROM webhook_dedup.outbox AS o"
                              " WHERE o.target OPERATOR(pg_catalog.=) %s"
                              "   AND o.state OPERATOR(pg_catalog.=) 'processing'", (target,)).fetchone()
    return f"{id_}, '{tok}'::uuid"


def substitute(conn, call):
    """`call` with each {token:key} and {intent:target} filled in."""
    call = re.sub(r"\{token:(\w+)\}", lambda m: token(conn, m.group(1)), call)
    return re.sub(r"\{intent:(\w+)\}", lambda m: intent(conn, m.group(1)), call)


def token(conn, key):
    """Key `key`'s claim token as an SQL literal."""
    (tok,) = conn.execute("SELECT k.claim_token FROM webhook_dedup.keys AS k"
                          " WHERE k.idem_key OPERATOR(pg_catalog.=) %s", (key,)).fetchone()
    return f"'{tok}'::uuid"


def superuser_of(conn):
    return conn.execute("SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) %s",
                        (OWNER,)).fetchone()[0]


def test_the_trap_is_armed(attacked):
    """The hostile objects are reachable: an unqualified comparison in a
    session of the database (here the owner's own, which cannot escalate)
    calls them. Without this the other tests could pass vacuously."""
    with psycopg.connect(host=str(attacked.dir), port=5432, user=OWNER, dbname="victim", autocommit=True) as conn:
        assert conn.execute("SHOW search_path").fetchone()[0] == "evil, pg_catalog, public"
        conn.execute("SELECT 'a'::text = 'b'::text, min(x) FROM (VALUES (interval '1 s')) AS v(x)")
        calls = conn.execute("DELETE FROM evil.calls WHERE by_role OPERATOR(pg_catalog.=) %s RETURNING fn",
                             (OWNER,)).fetchall()
        assert sorted(f for (f,) in calls) == ["=(text,text)", "min(interval)"]
        assert not superuser_of(conn)


def test_every_function_as_superuser_calls_nothing_of_the_attacker(attacked):
    with attacked.connect("victim") as conn:
        assert conn.execute("SHOW search_path").fetchone()[0] == "evil, pg_catalog, public"
        for call in CALLS:
            conn.execute(substitute(conn, call))
        for view in VIEWS:
            conn.execute(f"SELECT * FROM webhook_dedup.{view}").fetchall()
        calls = conn.execute("SELECT fn, by_role FROM evil.calls").fetchall()
        assert calls == [], f"the attacker's objects ran: {calls}"
        assert not superuser_of(conn)


def fresh_keys(call):
    """`call` on keys (and a source row) of its own: k1 becomes uk1, ..."""
    for key in ("k1", "m1", "m2", "u1", "q1", "o1"):
        call = call.replace(f"'{key}'", f"'u{key}'").replace(f"token:{key}", f"token:u{key}")
    return call.replace("('t',", "('ut',")


def test_every_statement_is_qualified_without_the_pin(attacked):
    """The pin hides the trap from the functions, so the pass above proves
    the pin. Without it (the functions' SET clauses reset, in a transaction
    rolled back) and with every claim and completion through the SQL
    statements (direct_writes off), the same calls must still reach
    nothing of the attacker's: every statement names its objects."""
    with attacked.connect("victim") as conn:
        conn.execute("BEGIN")
        try:
            for (fn,) in conn.execute(
                    """SELECT p.oid::pg_catalog.regprocedure::pg_catalog.text FROM pg_catalog.pg_proc AS p
                        WHERE p.prosecdef AND p.oid OPERATOR(pg_catalog.=) ANY (ARRAY(
                              SELECT d.objid FROM pg_catalog.pg_depend AS d
                               WHERE d.refobjid OPERATOR(pg_catalog.=) (SELECT e.oid FROM pg_catalog.pg_extension AS e
                                      WHERE e.extname OPERATOR(pg_catalog.=) 'webhook_dedup')))""").fetchall():
                conn.execute(f"ALTER FUNCTION {fn} RESET ALL")
            conn.execute("SET LOCAL webhook_dedup.direct_writes = off")
            for call in CALLS:
                if "run_maintenance" in call:
                    continue  # it pins search_path in Rust as well (src/maintenance)
                conn.execute(substitute(conn, fresh_keys(call)))
            calls = conn.execute("SELECT fn, by_role FROM evil.calls").fetchall()
        finally:
            conn.execute("ROLLBACK")
        assert calls == [], f"the attacker's objects ran: {calls}"
        assert not superuser_of(conn)


def test_every_function_is_called(attacked):
    """CALLS covers every function of the extension (a new one must be
    added there). The SQL edition's helpers (named _...) are reached
    through the API's functions (tests/sql_edition/test_schema.py)."""
    with safe_connect(attacked) as conn:
        names = [n for (n,) in conn.execute(
            """SELECT p.proname FROM pg_catalog.pg_depend d
                 JOIN pg_catalog.pg_proc p ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                 JOIN pg_catalog.pg_extension e ON d.refobjid = e.oid AND d.refclassid = 'pg_extension'::regclass
                WHERE e.extname = 'webhook_dedup' AND d.deptype = 'e'""").fetchall()]
    text = "\n".join(CALLS)
    covered_otherwise = {"webhook_monotonic_guard": "guarded", "sources_changed": "webhook_dedup.sources"}
    if EDITION == "sql":
        names = [n for n in names if not n.startswith("_")]
    missing = [n for n in names if f"{n}(" not in text and covered_otherwise.get(n, "\0") not in text]
    assert missing == []


@native_only("worker")
def test_the_worker_calls_nothing_of_the_attacker(attacked):
    """The worker's session (a superuser) picks up the database's
    search_path when it connects: restart so that it does, then wait for a
    pass that had work in every step."""
    attacked.stop()
    attacked.start()
    with safe_connect(attacked) as conn:
        since = conn.execute("SELECT now()").fetchone()[0]
        # work for every step of the next pass: a lease that expires, a
        # completed key past retention, history past retention
        conn.execute("SELECT webhook_dedup.webhook_claim('w', 'lapsed', lease => '1 second')")
        tok = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim('w', 'old')").fetchone()[0]
        conn.execute("SELECT webhook_dedup.webhook_complete('w', 'old', %s)", (tok,))
        conn.execute("UPDATE webhook_dedup.keys SET expires_at = now() - interval '1 day',"
                     " last_seen_at = now() - interval '4000 days' WHERE idem_key = 'old'")
        conn.execute("SELECT webhook_dedup.webhook_advance('w', 'e', now())")
        conn.execute("UPDATE webhook_dedup.watermarks SET updated_at = now() - interval '4000 days'")

        def pass_with_work():
            return conn.execute(
                """SELECT pg_catalog.bool_or(leases_expired > 0) AND pg_catalog.bool_or(keys_pruned > 0)
                          AND pg_catalog.bool_or(history_pruned > 0) AND pg_catalog.bool_and(errors = '{}')
                     FROM webhook_dedup.maintenance_runs
                    WHERE started_at > %s AND application_name = 'webhook_dedup maintenance'""",
                (since,)).fetchone()[0]

        wait_for("worker passes that expired a lease, deleted a key and pruned history", pass_with_work, 60,
                 detail=lambda: conn.execute("SELECT * FROM webhook_dedup.maintenance_runs").fetchall())
        calls = conn.execute("SELECT fn, by_role FROM evil.calls").fetchall()
        assert calls == [], f"the attacker's objects ran: {calls}"
        assert not superuser_of(conn)


# Overloads in public. PostgreSQL 15 gives CREATE on public to the database
# owner (pg_database_owner), who need not be superuser. An overload whose
# parameters are varchar is a better match than the extension's text
# function for a caller whose driver binds strings as varchar (pgJDBC's
# default stringtype=varchar), whatever the search_path says
# (CVE-2018-1058's class). 0.2.0 as first landed put the functions in
# public: a superuser's webhook_resolve made the owner superuser, a
# receiver's webhook_claim got a fake duplicate (the event dropped), and a
# third overload of webhook_complete made every completion 42725. Now every
# function lives in schema webhook_dedup, which nobody else may write to,
# and the documented calls name it.
OVERLOADS = f"""
CREATE TABLE public.overload_calls (fn text, by_role text);
GRANT INSERT, SELECT ON public.overload_calls TO PUBLIC;
CREATE FUNCTION public.webhook_resolve(source varchar, idem_key varchar, new_state varchar, result jsonb DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.overload_calls VALUES ('webhook_resolve', current_user);
  BEGIN EXECUTE 'ALTER ROLE {OWNER} SUPERUSER'; EXCEPTION WHEN insufficient_privilege THEN NULL; END;
  RETURN 'completed';
END $$;
CREATE FUNCTION public.webhook_claim(source varchar, idem_key varchar, payload bytea DEFAULT NULL,
                                     lease interval DEFAULT NULL, event_type varchar DEFAULT NULL)
RETURNS TABLE (outcome text, claim_token uuid, attempt integer) LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.overload_calls VALUES ('webhook_claim', current_user);
  RETURN QUERY SELECT 'duplicate'::text, NULL::uuid, 1;
END $$;
CREATE FUNCTION public.webhook_complete(source varchar, idem_key varchar, claim_token uuid, result jsonb DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.overload_calls VALUES ('webhook_complete', current_user); RETURN true; END $$;
CREATE FUNCTION public.webhook_complete(source text, idem_key varchar, claim_token uuid, result jsonb DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.overload_calls VALUES ('webhook_complete', current_user); RETURN true; END $$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO PUBLIC;
"""


def varchar_connect(cluster, user):
    """A session of `victim` whose driver binds every string as varchar,
    as pgJDBC does by default, with the default search_path."""
    conn = psycopg.connect(host=str(cluster.dir), port=5432, user=user, dbname="victim", autocommit=True,
                           options="-c search_path=\"$user\",public")
    from psycopg.types.string import StrDumperVarchar
    conn.adapters.register_dumper(str, StrDumperVarchar)
    return conn


@pytest.fixture(scope="module")
def overloads(attacked):
    """The owner's overloads in public, and a receiver login."""
    with psycopg.connect(host=str(attacked.dir), port=5432, user=OWNER, dbname="victim", autocommit=True) as conn:
        assert conn.execute("SELECT has_schema_privilege('public', 'CREATE')").fetchone()[0], \
            "PostgreSQL 15: the database owner may create in public"
        conn.execute(OVERLOADS)
    with safe_connect(attacked) as conn:
        conn.execute("CREATE ROLE o_receiver LOGIN IN ROLE webhook_dedup_receiver")
    return attacked


def overload_calls(cluster):
    with safe_connect(cluster) as conn:
        return conn.execute("SELECT fn, by_role FROM public.overload_calls").fetchall()


def test_the_overloads_are_a_real_trap(overloads):
    """Without this the tests below could pass vacuously: an unqualified
    call bound as varchar (in the owner's own session, which cannot
    escalate) runs the owner's overload, and the binding really is varchar."""
    with varchar_connect(overloads, OWNER) as conn:
        assert conn.execute("SELECT pg_typeof(%s)::text", ("x",)).fetchone()[0] == "character varying"
        assert conn.execute("SELECT outcome FROM webhook_claim(%s, %s)", ("s", "trap")).fetchone()[0] == "duplicate"
        conn.execute("DELETE FROM public.overload_calls")


def test_a_superusers_resolve_runs_the_extensions_function(overloads):
    with safe_connect(overloads) as conn:
        tok = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim('ov', 'unsure')").fetchone()[0]
        conn.execute("SELECT webhook_dedup.webhook_mark_unknown('ov', 'unsure', %s)", (tok,))
    with varchar_connect(overloads, "postgres") as conn:
        previous = conn.execute("SELECT webhook_dedup.webhook_resolve(%s, %s, %s)",
                                ("ov", "unsure", "completed")).fetchone()[0]
        assert previous == "unknown_outcome", "the extension's webhook_resolve returns the state it replaced"
        assert not superuser_of(conn)
    assert overload_calls(overloads) == []


def test_a_receivers_claim_and_completion_run_the_extensions_functions(overloads):
    with varchar_connect(overloads, "o_receiver") as conn:
        outcome, tok = conn.execute("SELECT outcome, claim_token FROM webhook_dedup.webhook_claim(%s, %s)",
                                    ("ov", "event-1")).fetchone()
        assert outcome == "claimed", "not the owner's fake duplicate: the event would have been dropped"
        # three candidates in public (two of them the owner's) made this 42725
        assert conn.execute("SELECT webhook_dedup.webhook_complete(%s, %s, %s, %s)",
                            ("ov", "event-1", tok, Jsonb({"status": 200}))).fetchone()[0] is True
        assert conn.execute("SELECT outcome FROM webhook_dedup.webhook_claim(%s, %s)",
                            ("ov", "event-1")).fetchone()[0] == "duplicate"
    assert overload_calls(overloads) == []
    with safe_connect(overloads) as conn:
        assert conn.execute("SELECT state FROM webhook_dedup.keys WHERE source = 'ov' AND idem_key = 'event-1'"
                            ).fetchone()[0] == "completed"


def test_nothing_of_the_extension_is_in_public(overloads):
    """CREATE EXTENSION puts nothing in the schema it was run in (public by
    default), where a database owner may create."""
    with safe_connect(overloads) as conn:
        members = conn.execute(
            """SELECT pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid), n.nspname
                 FROM pg_catalog.pg_depend AS d
                 JOIN pg_catalog.pg_extension AS e ON d.refobjid = e.oid AND e.extname = 'webhook_dedup'
                 LEFT JOIN pg_catalog.pg_proc AS p ON d.classid = 'pg_proc'::regclass AND p.oid = d.objid
                 LEFT JOIN pg_catalog.pg_class AS c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
                 LEFT JOIN pg_catalog.pg_type AS t ON d.classid = 'pg_type'::regclass AND t.oid = d.objid
                 JOIN pg_catalog.pg_namespace AS n ON n.oid = coalesce(p.pronamespace, c.relnamespace, t.typnamespace)
                WHERE d.deptype = 'e'""").fetchall()
        assert members and {schema for _, schema in members} == {"webhook_dedup"}, members
        assert not conn.execute("SELECT has_schema_privilege(%s, 'webhook_dedup', 'CREATE')", (OWNER,)).fetchone()[0]


def test_create_extension_refuses_a_schema_someone_else_prepared(connect):
    """A schema webhook_dedup made beforehand (here by a database owner who
    is not superuser) could hold that role's functions or grant CREATE on
    itself: CREATE EXTENSION refuses it (42P06) and creates nothing."""
    with connect() as conn:
        conn.execute("DROP DATABASE IF EXISTS prepared")
        conn.execute("DROP ROLE IF EXISTS prepared_owner")
        conn.execute("CREATE ROLE prepared_owner LOGIN")
        conn.execute("CREATE DATABASE prepared OWNER prepared_owner")
    try:
        with psycopg.connect(dbname="prepared", user="prepared_owner", autocommit=True) as conn:
            conn.execute("CREATE SCHEMA webhook_dedup")
            conn.execute("GRANT CREATE ON SCHEMA webhook_dedup TO PUBLIC")
        with psycopg.connect(dbname="prepared", autocommit=True) as conn:
            with pytest.raises(psycopg.errors.DuplicateSchema, match="schema webhook_dedup already exists"
                                                                     r" \(owned by prepared_owner\)"):
                conn.execute("CREATE EXTENSION webhook_dedup")
            assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'webhook_dedup'").fetchone()[0] == 0
            assert conn.execute("SELECT count(*) FROM pg_proc WHERE pronamespace = 'webhook_dedup'::regnamespace"
                                ).fetchone()[0] == 0
    finally:
        with connect() as conn:
            conn.execute("DROP DATABASE prepared")
            conn.execute("DROP ROLE prepared_owner")


@pytest.mark.parametrize("encoding", ["LATIN1", "SQL_ASCII"])
def test_other_encodings_refuse_the_extension(connect, encoding):
    """Fault 4: CREATE EXTENSION used to succeed in LATIN1 and SQL_ASCII
    databases, whose calls then failed with XX000 (invalid UTF-8)."""
    db = f"enc_{encoding.lower()}"
    with connect() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {db}")
        conn.execute(f"CREATE DATABASE {db} ENCODING '{encoding}' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
    try:
        if EDITION == "sql":
            # pg_tle stores the artifact's UTF-8 text as the database's
            # encoding reads it; CREATE EXTENSION then fails before the
            # script's own check, on a character the encoding cannot hold
            # (22P05) or a conversion PostgreSQL has not (0A000): refused
            # all the same, with another SQLSTATE (docs/sql-edition.md)
            register_sql_edition(sql_edition_bin(), os.environ["PGHOST"], db)
            with psycopg.connect(dbname=db, autocommit=True) as conn:
                with pytest.raises(psycopg.Error) as refused:
                    conn.execute("CREATE EXTENSION webhook_dedup")
                assert refused.value.sqlstate in ("22023", "22P05", "0A000"), refused.value
                assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'webhook_dedup'"
                                    ).fetchone()[0] == 0
            return
        with psycopg.connect(dbname=db, autocommit=True) as conn:
            with pytest.raises(psycopg.errors.InvalidParameterValue,
                               match=f"needs a database with encoding UTF8, not {encoding}"):
                conn.execute("CREATE EXTENSION webhook_dedup")
            assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'webhook_dedup'").fetchone()[0] == 0
    finally:
        with connect() as conn:
            conn.execute(f"DROP DATABASE {db}")


@pytest.fixture(scope="module")
def hostile(connect):
    """A connection holding a million headers (a 20 MB jsonb: the signature
    header and 999,999 others) and a 100 MB body in temporary tables, built
    before any timeout is set."""
    conn = connect()
    conn.execute("""CREATE TEMP TABLE h AS
                    SELECT jsonb_object_agg('x-h-' || i, 'v')
                           || jsonb_build_object('X-Hub-Signature-256', 'sha256=' || repeat('0', 64)) AS headers
                      FROM generate_series(1, 999999) AS i""")
    conn.execute("CREATE TEMP TABLE p AS SELECT convert_to(repeat('a', 100 * 1024 * 1024), 'UTF8') AS payload")
    yield conn
    conn.close()


# Every secret costs one HMAC of the whole body, so the number of secrets
# sets how long one call takes: long_call() sizes it on this machine.
def verify_call(secrets: int) -> str:
    return (f"SELECT webhook_dedup.webhook_verify('github', p.payload, h.headers,"
            f" ARRAY(SELECT 's' || i FROM generate_series(1, {secrets}) AS i)) FROM p, h")


def long_call(conn, at_least: float = 6.0) -> tuple[str, float]:
    """A call that takes at least `at_least` seconds here, and how long it
    took when last run: calls with 5 and 15 secrets are timed, which gives
    the cost of one secret (the slope) apart from the fixed cost of reading
    the headers, and the count is chosen for 1.5 times `at_least`; then
    the call is run, and grown and run again while it is shorter than
    `at_least` (a slope measured while the machine was busy is too steep),
    so the interruption tests below never depend on how fast this machine
    is, nor on its noise. Fails only when 5,000 secrets are too few."""
    def seconds(n):
        started = time.monotonic()
        conn.execute(verify_call(n))
        return time.monotonic() - started

    few, more = seconds(5), seconds(15)
    per_secret = max((more - few) / 10, 1e-4)
    fixed = max(few - 5 * per_secret, 0.0)
    n = max(15, min(5000, int((at_least * 1.5 - fixed) / per_secret) + 1))
    took = seconds(n)
    while took <= at_least and n < 5000:
        n = min(5000, int(n * at_least * 1.5 / max(took, 1e-3)) + 1)
        took = seconds(n)
    assert took > at_least, f"{n} secrets took only {took:.1f} s: too short to show an interruption inside one call"
    return verify_call(n), took


def test_a_million_headers_in_linear_time(hostile):
    """Fault 3: 100,000 headers took 11.7 s and 200,000 took 35.5 s
    (quadratic: twice the headers took three times as long, and growing).
    Now four times the headers (250,000 to a million, both far beyond the
    CPU's caches) take about four times as long; quadratic time would take
    sixteen. The bound, 8, is far from both, so the machine's noise cannot
    decide the test."""
    hostile.execute("""CREATE TEMP TABLE h250k AS
                       SELECT jsonb_object_agg('x-h-' || i, 'v') AS headers FROM generate_series(1, 250000) AS i""")

    def seconds(table):
        started = time.monotonic()
        assert hostile.execute(f"SELECT webhook_dedup.webhook_verify('github', 'x'::bytea, t.headers, ARRAY['s']) FROM {table} AS t"
                               ).fetchone() == (False,)
        return time.monotonic() - started

    seconds("h250k")  # warm-up: the library, the plans
    small = min(seconds("h250k") for _ in range(3))
    large = min(seconds("h") for _ in range(3))
    assert large / small < 8, f"1,000,000 headers {large:.2f} s, 250,000 {small:.2f} s"


def test_statement_timeout_interrupts_a_call(hostile):
    """Fault 3: the issue's case, a million headers and a 100 MB body under
    statement_timeout = 2 s, gets 57014 from inside one call: before half
    of the rest of that call (at least 6 s alone) would have run. (The
    bound was 3 s flat; on a machine at half speed, freeing the call's
    100 MB after the cancel took 1.2 s, and the test failed while the
    interruption had worked.)"""
    call, one_call = long_call(hostile)
    hostile.execute("SET statement_timeout = '2s'")
    try:
        started = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled):
            hostile.execute(call)
        took = time.monotonic() - started
        assert took < 2.0 + (one_call - 2.0) / 2, f"cancelled after {took:.1f} s of a {one_call:.1f} s call"
    finally:
        hostile.execute("RESET statement_timeout")


def test_cancel_and_terminate_interrupt_a_call(hostile, connect):
    """pg_cancel_backend and pg_terminate_backend stop a call in its middle
    (before, the backend never looked, and DROP DATABASE ... WITH (FORCE)
    waited for it): a call of at least 6 s stops within 2 s of a signal
    sent 0.5 s into it."""
    call, _ = long_call(hostile)
    pid = hostile.info.backend_pid
    with connect() as admin:
        for signal, error in (("pg_cancel_backend", psycopg.errors.QueryCanceled),
                              ("pg_terminate_backend", psycopg.OperationalError)):
            timer = threading.Timer(0.5, lambda: admin.execute(f"SELECT {signal}(%s)", (pid,)))
            started = time.monotonic()
            timer.start()
            with pytest.raises(error):
                hostile.execute(call)
            timer.join()
            assert time.monotonic() - started < 2.0, signal


# Least privilege: the functions are the only way in. Real login roles,
# each granted one of the extension's roles (or none), try what their job
# needs and what it does not.
LOGINS = {"t_nobody": None, "t_receiver": "webhook_dedup_receiver", "t_operator": "webhook_dedup_operator",
          "t_analyst": "webhook_dedup_reader"}

# (what, SQL, the logins it succeeds for); every other login gets 42501
ACTIONS = [
    ("verify a signature", "SELECT webhook_dedup.webhook_verify('github', 'x'::bytea, '{}', ARRAY['s'])", set(LOGINS)),
    ("derive a key", "SELECT webhook_dedup.webhook_key('s', 'id')", set(LOGINS)),
    ("claim", "SELECT outcome FROM webhook_dedup.webhook_claim('lp', 'k-' || current_user)", {"t_receiver"}),
    ("complete", "SELECT webhook_dedup.webhook_complete('lp', 'k-' || current_user,"
                 " (SELECT claim_token FROM webhook_dedup.webhook_claim('lp', 'k-' || current_user)))", {"t_receiver"}),
    ("enqueue", "SELECT webhook_dedup.webhook_enqueue('lp', 'q-' || current_user, 'p'::bytea)", {"t_receiver"}),
    ("take from the queue", "SELECT * FROM webhook_dedup.webhook_next('lp')", {"t_receiver"}),
    ("advance a watermark", "SELECT webhook_dedup.webhook_advance('lp', 'e', now())", {"t_receiver"}),
    ("receive", "SELECT * FROM webhook_dedup.webhook_receive('github', 'x'::bytea, '{}', ARRAY['s'], tolerance => '1 s')",
     {"t_receiver"}),
    ("resolve", "SELECT webhook_dedup.webhook_resolve('lp', 'held', 'completed')", {"t_operator"}),
    ("forget", "SELECT webhook_dedup.webhook_forget('lp', 'gone')", {"t_operator"}),
    ("run maintenance", "SELECT * FROM webhook_dedup.run_maintenance()", {"t_operator"}),
    ("flush the counters", "SELECT webhook_dedup.flush_metrics()", {"t_operator"}),
    ("configure a source", "INSERT INTO webhook_dedup.sources (source, note) VALUES ('lp-' || current_user, 'x')",
     {"t_operator"}),
    ("change a source", "UPDATE webhook_dedup.sources SET note = 'y' WHERE source = 'lp'", {"t_operator"}),
    ("pause a source", "SELECT webhook_dedup.pause('lp-p-' || current_user, 'crm down')", {"t_operator"}),
    ("resume a source", "SELECT webhook_dedup.resume('lp')", {"t_operator"}),
    # the pause is written by pause() and resume() only (they park and
    # unpark the source's keys with it)
    ("pause a source by hand", "UPDATE webhook_dedup.sources SET paused_at = now()", set()),
    ("resume a source by hand", "UPDATE webhook_dedup.sources SET paused_at = NULL, paused_by = NULL", set()),
    ("insert a paused source", "INSERT INTO webhook_dedup.sources (source, paused_at) VALUES ('lp-x', now())", set()),
    # the payload archive: operators configure it and erase from it; nobody
    # reads it directly (docs/security.md)
    ("keep a source's payloads", "INSERT INTO webhook_dedup.sources (source, keep_payload, payload_retention)"
     " VALUES ('lp-a-' || current_user, true, '1 day')", {"t_operator"}),
    ("redact a key", "SELECT * FROM webhook_dedup.redact('lp', idem_key => 'held')", {"t_operator"}),
    ("redact a source's past", "SELECT * FROM webhook_dedup.redact('lp', before => now())", {"t_operator"}),
    ("redact an account", "SELECT * FROM webhook_dedup.redact('lp', account => 'a')", {"t_operator"}),
    ("purge redactions from the data files", "SELECT * FROM webhook_dedup.purge_redactions()", {"t_operator"}),
    ("read the record of redactions", "SELECT count(*) FROM webhook_dedup.redactions", {"t_operator"}),
    ("clear the record of redactions", "DELETE FROM webhook_dedup.redactions", {"t_operator"}),
    ("forge a redaction", "INSERT INTO webhook_dedup.redactions (source, redacted_at, redacted_by, keys, deliveries,"
     " xid, relations) VALUES ('lp', now(), 'me', 0, 0, '1', '{}')", set()),
    ("mark a redaction purged by hand", "UPDATE webhook_dedup.redactions SET purged_at = now()", set()),
    ("read the archive", "SELECT payload, headers FROM webhook_dedup.archive", set()),
    ("read the archive's default partition", "SELECT payload FROM webhook_dedup.archive_default", set()),
    ("erase the archive by hand", "DELETE FROM webhook_dedup.archive", set()),
    ("mark a key redacted by hand", "UPDATE webhook_dedup.keys SET redacted_at = now()", set()),
    ("export archived deliveries", "SELECT count(*) FROM webhook_dedup.export_deliveries('lp', now() - interval"
     " '1 day', now())", {"t_operator"}),
    ("count a redrive", "SELECT * FROM webhook_dedup.redrive('lp', dry_run => true)", {"t_operator"}),
    ("start a redrive", "SELECT * FROM webhook_dedup.redrive('lp')", {"t_operator"}),
    ("cancel a redrive", "SELECT webhook_dedup.cancel_redrive({redrive})", {"t_operator"}),
    ("read redrive progress", "SELECT count(*) FROM webhook_dedup.redrive_runs", {"t_operator", "t_analyst"}),
    ("read what a redrive did with each key", "SELECT run, n, idem_key, outcome FROM webhook_dedup.redrive_keys",
     {"t_operator"}),
    ("change what a redrive did by hand", "UPDATE webhook_dedup.redrive_keys SET outcome = 'moved'", set()),
    ("start a redrive by hand", "INSERT INTO webhook_dedup.redrives (source, states, conflicts, created_at,"
     " created_by, status, matched) VALUES ('lp', '{}', false, now(), 'me', 'running', 0)", set()),
    ("enqueue a reconciled event", "SELECT webhook_dedup.reconcile('lp', 'r-' || current_user, 'p'::bytea)",
     {"t_receiver"}),
    ("ask which events never came", "SELECT * FROM webhook_dedup.unseen('lp', ARRAY['x'])",
     {"t_operator", "t_analyst"}),
    ("ask which node holds a source", "SELECT count(*) FROM webhook_dedup.source_node('lp')",
     {"t_receiver", "t_operator", "t_analyst"}),
    ("add a verification key", "SELECT webhook_dedup.add_secret('lp-' || current_user, 'k')", {"t_operator"}),
    ("retire a verification key", "SELECT webhook_dedup.retire_secret('lp', (SELECT min(id) FROM"
     " webhook_dedup.list_secrets('lp')))", {"t_operator"}),
    ("list verification keys", "SELECT count(*) FROM webhook_dedup.list_secrets()", {"t_operator"}),
    ("leave keys out of dumps", "SELECT webhook_dedup.dump_secrets(false)", {"t_operator"}),
    ("read verification keys", "SELECT secret FROM webhook_dedup.source_secrets", set()),
    ("store a key by hand", "INSERT INTO webhook_dedup.source_secrets (source, secret, not_before, created_at)"
                            " VALUES ('lp', 'mine', now(), now())", set()),
    ("read a view", "SELECT count(*) FROM webhook_dedup.key_states", {"t_operator", "t_analyst"}),
    ("read live counters", "SELECT count(*) FROM webhook_dedup.metrics_live()", {"t_operator", "t_analyst"}),
    ("read every node's live counters", "SELECT count(*) FROM webhook_dedup.metrics_live_cluster()",
     {"t_operator", "t_analyst"}),
    ("ask whether a source has history", "SELECT webhook_dedup.source_has_history('lp')", {"t_operator", "t_analyst"}),
    # the outbox ({intent}: an intent the fixture wrote; a random lease
    # token is stale, so the allowed calls change nothing either)
    ("write an outbox intent", "SELECT webhook_dedup.webhook_outbox_put('lp', 'k-' || current_user,"
     " (SELECT claim_token FROM webhook_dedup.webhook_claim('lp', 'k-' || current_user)), 'op', 'lp', '{}')",
     {"t_receiver"}),
    ("write an intent with a stale token", "SELECT webhook_dedup.webhook_outbox_put('lp', 'held', gen_random_uuid(),"
     " 'op2', 'lp', '{}')", {"t_receiver"}),
    ("take from the outbox", "SELECT * FROM webhook_dedup.webhook_outbox_next('lp-none')", {"t_receiver"}),
    ("acknowledge an intent", "SELECT webhook_dedup.webhook_outbox_ack({intent}, gen_random_uuid())", {"t_receiver"}),
    ("fail an intent", "SELECT webhook_dedup.webhook_outbox_fail({intent}, gen_random_uuid(), 'e')", {"t_receiver"}),
    ("mark an intent unknown", "SELECT webhook_dedup.webhook_outbox_unknown({intent}, gen_random_uuid())",
     {"t_receiver"}),
    ("resolve an intent", "SELECT webhook_dedup.webhook_outbox_resolve({intent}, 'pending')", {"t_operator"}),
    ("read intents' requests", "SELECT request, response FROM webhook_dedup.outbox", {"t_operator"}),
    ("read the outbox backlog", "SELECT count(*) FROM webhook_dedup.outbox_backlog", {"t_operator", "t_analyst"}),
    ("read the outbox's parked intents", "SELECT count(*) FROM webhook_dedup.outbox_unknown_outcomes"
     " UNION ALL SELECT count(*) FROM webhook_dedup.outbox_dead_letters", {"t_operator", "t_analyst"}),
    ("read lease tokens", "SELECT lease_token FROM webhook_dedup.outbox", set()),
    ("write an intent by hand", "INSERT INTO webhook_dedup.outbox (source, idem_key, operation, target, request,"
     " downstream_key, downstream_idempotent, key_attempt, state, created_at, updated_at)"
     " VALUES ('lp', 'held', 'x', 'lp', '{}', 'x', true, 1, 'pending', now(), now())", set()),
    ("deliver an intent by hand", "UPDATE webhook_dedup.outbox SET state = 'completed'", set()),
    ("read keys", "SELECT count(*) FROM webhook_dedup.keys", set()),
    ("read payloads", "SELECT count(*) FROM webhook_dedup.payloads", set()),
    ("write a key", "INSERT INTO webhook_dedup.keys (source, idem_key, state, first_seen_at, last_seen_at)"
                    " VALUES ('lp', 'forged', 'completed', now(), now())", set()),
    ("complete a key by hand", "UPDATE webhook_dedup.keys SET state = 'completed'", set()),
    ("delete a key by hand", "DELETE FROM webhook_dedup.keys", set()),
    ("forge a count", "INSERT INTO webhook_dedup.claim_counts (bucket, source) VALUES (now(), 'lp')", set()),
    ("move a watermark", "UPDATE webhook_dedup.watermarks SET source_updated_at = 'infinity'", set()),
]


INTENT: list = []  # the intent the fixture wrote
REDRIVE: list = []  # the redrive run the fixture started


@pytest.fixture(scope="module")
def logins(connect):
    with connect() as conn:
        for login, role in LOGINS.items():
            conn.execute(f"DROP ROLE IF EXISTS {login}")
            conn.execute(f"CREATE ROLE {login} LOGIN")
            if role:
                conn.execute(f"GRANT {role} TO {login}")
        tok = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim('lp', 'held')").fetchone()[0]
        INTENT.append(conn.execute("SELECT webhook_dedup.webhook_outbox_put('lp', 'held', %s, 'refund', 'lp', '{}')",
                                   (tok,)).fetchone()[0])
        conn.execute("SELECT webhook_dedup.add_secret('lp', 'old-key')")
        conn.execute("INSERT INTO webhook_dedup.sources (source, note) VALUES ('lp', 'x') ON CONFLICT DO NOTHING")
        conn.execute("SELECT webhook_dedup.webhook_claim('lp', 'gone')")
        REDRIVE.append(conn.execute("SELECT run FROM webhook_dedup.redrive('lp')").fetchone()[0])
    yield
    with connect() as conn:
        conn.execute("DELETE FROM webhook_dedup.sources WHERE source LIKE 'lp-%' OR source = 'lp'")
        conn.execute("DELETE FROM webhook_dedup.source_secrets WHERE source LIKE 'lp%'")
        for login in LOGINS:
            conn.execute(f"DROP OWNED BY {login}")
            conn.execute(f"DROP ROLE {login}")


@pytest.mark.parametrize("what,sql,allowed", ACTIONS, ids=[a[0] for a in ACTIONS])
@pytest.mark.parametrize("login", list(LOGINS))
def test_each_role_does_its_job_and_nothing_else(logins, login, what, sql, allowed):
    sql = sql.replace("{intent}", str(INTENT[0])).replace("{redrive}", str(REDRIVE[0]))
    with psycopg.connect(user=login, autocommit=True) as conn:
        conn.execute("BEGIN")
        try:
            if login in allowed:
                conn.execute(sql)
            else:
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(sql)
        finally:
            conn.execute("ROLLBACK")


def test_no_role_but_the_owner_holds_table_privileges(connect):
    """The catalog says the same: privileges on tables of the schema are
    only the owner's, but for the operator on webhook_dedup.sources, the
    record of redactions and what each redrive did per key, and the
    readers on maintenance_runs; every SECURITY DEFINER function pins
    search_path, and no function that changes state is executable by
    PUBLIC."""
    with connect() as conn:
        grants = conn.execute(
            """SELECT c.relname, a.grantee::regrole::text, a.privilege_type
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
                      aclexplode(c.relacl) AS a
                WHERE n.nspname = 'webhook_dedup' AND c.relkind IN ('r', 'p', 'S')
                  AND a.grantee <> c.relowner ORDER BY 1, 2, 3""").fetchall()
        assert grants == [
            ("maintenance_runs", "pg_monitor", "SELECT"), ("maintenance_runs", "webhook_dedup_reader", "SELECT"),
            ("redactions", "webhook_dedup_operator", "DELETE"), ("redactions", "webhook_dedup_operator", "SELECT"),
            ("redrive_keys", "webhook_dedup_operator", "SELECT"),
            ("sources", "webhook_dedup_operator", "DELETE"), ("sources", "webhook_dedup_operator", "SELECT"),
        ]
        # the operator inserts and updates every column of a source's row
        # but the pause's (written by pause() and resume())
        columns = conn.execute(
            """SELECT a.attname, x.privilege_type
                 FROM pg_attribute a, aclexplode(a.attacl) AS x
                WHERE a.attrelid = 'webhook_dedup.sources'::regclass AND x.grantee = 'webhook_dedup_operator'::regrole
                ORDER BY 1, 2""").fetchall()
        settable = {r[0] for r in conn.execute(
            """SELECT attname FROM pg_attribute WHERE attrelid = 'webhook_dedup.sources'::regclass AND attnum > 0
                  AND NOT attisdropped AND attname NOT IN ('paused_at', 'paused_by', 'pause_reason')""")}
        assert len(settable) == 16
        assert columns == sorted((c, p) for c in settable for p in ("INSERT", "UPDATE"))
        unpinned = conn.execute(
            """SELECT p.oid::regprocedure::text FROM pg_proc p
                 JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
                 JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'webhook_dedup'
                WHERE p.prosecdef AND p.proconfig IS DISTINCT FROM ARRAY['search_path=pg_catalog, pg_temp']"""
        ).fetchall()
        assert unpinned == []
        public_writers = conn.execute(
            """SELECT p.proname FROM pg_proc p
                 JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
                 JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'webhook_dedup'
                WHERE p.provolatile = 'v' AND p.oid <> 'webhook_dedup.webhook_monotonic_guard()'::regprocedure
                  AND has_function_privilege('public', p.oid, 'EXECUTE') ORDER BY 1""").fetchall()
        # (the guard is for your own tables' triggers: EXECUTE is needed to
        # create one; sources_changed, which empties every backend's caches,
        # is the extension's own). The SQL edition's helpers that PUBLIC may
        # run are volatile only for their random keys (_ct_equal) and name
        # no relation (tests/sql_edition/test_schema.py checks each).
        if EDITION == "sql":
            public_writers = [r for r in public_writers if not r[0].startswith("_")]
        assert public_writers == []


def test_a_flood_of_made_up_sources_hides_no_real_one(connect):
    """Fault 2: with about 1,700 made-up source names a caller filled the
    shared counters, so that real sources in every database were counted
    as `(overflow)`. Now only a receiver may count at all (a login without
    the role gets 42501), a database's unconfigured sources stop at its
    share, and a configured source of the flooded database and a source of
    another database are still counted under their own names."""
    dbs = ("flood_a", "flood_b")
    with connect() as conn:
        conn.execute("DROP ROLE IF EXISTS t_flooder")
        conn.execute("DROP ROLE IF EXISTS t_stranger")
        conn.execute("CREATE ROLE t_flooder LOGIN IN ROLE webhook_dedup_receiver")
        conn.execute("CREATE ROLE t_stranger LOGIN")
        for db in dbs:
            conn.execute(f"DROP DATABASE IF EXISTS {db}")
            conn.execute(f"CREATE DATABASE {db}")
    try:
        for db in dbs:
            with psycopg.connect(dbname=db, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION webhook_dedup")
        with psycopg.connect(dbname="flood_a", autocommit=True) as conn:
            conn.execute("INSERT INTO webhook_dedup.sources (source, note) VALUES ('configured', 'a real one')")
        flood = ("SELECT count(*) FROM generate_series(1, 1700) AS i,"
                 " LATERAL webhook_dedup.webhook_receive('github', 'x'::bytea, '{}', ARRAY['s'], source => 'fake' || i,"
                 " tolerance => '1 s')")
        with psycopg.connect(dbname="flood_a", user="t_stranger", autocommit=True) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(flood)
        with psycopg.connect(dbname="flood_a", user="t_flooder", autocommit=True) as conn:
            conn.execute(flood)
            conn.execute("SELECT outcome FROM webhook_dedup.webhook_claim('configured', 'k1')")
        with psycopg.connect(dbname="flood_b", user="t_flooder", autocommit=True) as conn:
            conn.execute("SELECT outcome FROM webhook_dedup.webhook_claim('real', 'k1')")

        def live(db):
            with psycopg.connect(dbname=db, autocommit=True) as conn:
                # every counter of each hour entry: a rejection counts one,
                # a first claim two (the delivery and the claim)
                return conn.execute("SELECT m.source, sum((SELECT sum(x) FROM unnest(m.counts) AS x))::int"
                                    "  FROM webhook_dedup.metrics_live() AS m WHERE NOT m.minute"
                                    " GROUP BY m.source").fetchall()

        a = dict(live("flood_a"))
        assert a["configured"] == 2
        if EDITION == "native":
            assert a["(overflow)"] > 1000, "most of the flood went to its database's overflow entry"
        else:
            # no shared table to fill: every source counted under its name
            # (docs/sql-edition.md, "Counting")
            assert "(overflow)" not in a and sum(1 for s in a if s.startswith("fake")) == 1700
        assert sum(n for s, n in a.items() if s.startswith("fake") or s == "(overflow)") == 1700, "none lost"
        assert dict(live("flood_b")) == {"real": 2}
    finally:
        with connect() as conn:
            for db in dbs:
                conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            conn.execute("DROP ROLE t_flooder")
            conn.execute("DROP ROLE t_stranger")



def test_default_privileges_give_nothing(connect):
    """Default privileges of the installing role (ALTER DEFAULT PRIVILEGES)
    would otherwise apply to the extension's functions and tables: CREATE
    EXTENSION revokes whatever it did not grant itself."""
    with connect() as conn:
        conn.execute("DROP DATABASE IF EXISTS defaults")
        conn.execute("CREATE DATABASE defaults")
        conn.execute("DROP ROLE IF EXISTS t_default")
        conn.execute("CREATE ROLE t_default LOGIN")
    try:
        with psycopg.connect(dbname="defaults", autocommit=True) as conn:
            conn.execute("ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO t_default")
            conn.execute("ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO t_default")
            conn.execute("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT EXECUTE ON FUNCTIONS TO t_default")
            conn.execute("CREATE EXTENSION webhook_dedup")
            granted = conn.execute(
                """SELECT 'table ' || c.relname FROM pg_class c, aclexplode(c.relacl) a
                    WHERE c.relnamespace = 'webhook_dedup'::regnamespace AND a.grantee = 't_default'::regrole
                   UNION ALL
                   SELECT 'function ' || p.proname FROM pg_proc p
                    WHERE p.prosecdef AND has_function_privilege('t_default', p.oid, 'EXECUTE')
                      AND p.oid IN (SELECT objid FROM pg_depend WHERE refobjid =
                                    (SELECT oid FROM pg_extension WHERE extname = 'webhook_dedup'))""").fetchall()
            assert granted == []
    finally:
        with connect() as conn:
            conn.execute("DROP DATABASE IF EXISTS defaults WITH (FORCE)")
            conn.execute("DROP OWNED BY t_default")
            conn.execute("DROP ROLE t_default")


@pytest.mark.parametrize("change", ["LOGIN", "CREATEROLE", "admin"])
def test_a_role_prepared_by_someone_else_is_refused(connect, change):
    """A role named like the extension's, made beforehand by someone who can
    create roles (or given a LOGIN, or administered by an ordinary role),
    would receive what receivers or operators may do: CREATE EXTENSION
    refuses it (55000) instead of granting to it."""
    with connect() as conn:
        conn.execute("DROP DATABASE IF EXISTS prepared")
        conn.execute("CREATE DATABASE prepared")
        conn.execute("DROP ROLE IF EXISTS t_admin")
        conn.execute("CREATE ROLE t_admin LOGIN")
        if change == "admin":
            conn.execute("GRANT webhook_dedup_operator TO t_admin WITH ADMIN OPTION")
        else:
            conn.execute(f"ALTER ROLE webhook_dedup_operator {change}")
    try:
        with psycopg.connect(dbname="prepared", autocommit=True) as conn:
            with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="webhook_dedup_operator exists"):
                conn.execute("CREATE EXTENSION webhook_dedup")
    finally:
        with connect() as conn:
            conn.execute("ALTER ROLE webhook_dedup_operator NOLOGIN NOCREATEROLE")
            conn.execute("DROP ROLE t_admin")
            conn.execute("DROP DATABASE prepared")
