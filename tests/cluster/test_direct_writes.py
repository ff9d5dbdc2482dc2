"""The direct write path (src/store/direct_writes/) answers and writes exactly as
the SQL it replaces.

A claim and a completion write through PostgreSQL's executor routines
instead of an SQL plan unless `webhook_dedup.direct_writes = off`. A review
of that path against PostgreSQL 15's executor found places where it could
differ from the SQL; each is reproduced here as a scenario, and every
scenario is run twice, once with direct writes on and once off, on sources
of its own: the answers (values returned, SQLSTATEs raised) and the rows
left behind must be the same. The differences found, and fixed:

- a row written earlier in the calling statement (by an SQL statement of
  the extension, such as webhook_enqueue's) locked as invisible (XX000):
  the command counter was not advanced before the command id was taken;
- a completion with a stale token locked the key's row before checking the
  token: it blocked the real holder until the stale caller's transaction
  ended, and under REPEATABLE READ raised 40001 where the SQL returns false;
- a table published for updates without a replica identity was updated,
  where the UPDATE is refused (55000);
- an extra unique index on (idem_key, source), which ON CONFLICT infers as
  an arbiter too, was ignored (with a collation of its own it raised 23505
  where the SQL found the key);
- the layout check ignored collations and type modifiers (a
  nondeterministic collation on the key columns, a timestamptz(0) column).

Runs on a cluster of its own: some scenarios change the key table.
"""

import threading
import time

import psycopg
import pytest

from edition import EDITION
from own_cluster import OwnCluster
import server_build

# What a key's row says, without what differs between any two runs
# (tokens, times): compared across the two modes.
ROW = """SELECT regexp_replace(idem_key COLLATE "C", '^[a-z]+-', ''), state, attempt, claim_token IS NULL,
                lease_expires_at IS NULL, due_at IS NULL, next_attempt_at IS NULL, fingerprint,
                event_type, result::text, last_step, last_error, deliveries, conflicts,
                completed_at IS NULL, expires_at IS NULL
           FROM webhook_dedup.keys WHERE source = %s ORDER BY idem_key"""


@pytest.fixture(scope="module")
def cluster():
    # Every duplicate recorded on its key: this test compares the two write
    # paths; a recent duplicate answered with a read alone is the direct
    # path's only, and test_duplicate_reads.py tests it.
    c = OwnCluster({"webhook_dedup.maintenance_interval": "0", "webhook_dedup.duplicate_record_interval": "0"})
    try:
        with c.connect() as conn:
            conn.execute("CREATE EXTENSION webhook_dedup")
        yield c
    finally:
        c.destroy()


RUNS = iter(range(1_000_000))


class Run:
    """One mode's run of a scenario: connections with direct writes on or
    off, a source of its own (the scenario's keys carry the mode as a
    prefix), and what was observed."""

    def __init__(self, cluster, mode: str):
        self.cluster, self.mode, self.source = cluster, mode, f"src{next(RUNS)}-{mode}"
        self.seen = []
        self._conns = []

    def connect(self, isolation: str | None = None, autocommit=True):
        conn = self.cluster.connect(autocommit=True)
        conn.execute("SELECT set_config('webhook_dedup.direct_writes', %s, false)", (self.mode,))
        if isolation:
            conn.execute(f"SET default_transaction_isolation = '{isolation}'")
        conn.autocommit = autocommit  # the next statement starts a transaction of that isolation
        self._conns.append(conn)
        return conn

    def key(self, name: str) -> str:
        return f"{self.mode}-{name}"

    def observe(self, what, conn, query, params=()):
        """Run `query` and record its rows, or the SQLSTATE it raised."""
        try:
            rows = conn.execute(query, params).fetchall() if conn.pgconn.transaction_status != 3 else "aborted"
            self.seen.append((what, rows))
            return rows
        except psycopg.Error as e:
            self.seen.append((what, e.sqlstate))
            return None

    def rows(self, conn=None):
        own = conn is None
        conn = conn or self.cluster.connect()
        try:
            self.seen.append(("rows", conn.execute(ROW, (self.source,)).fetchall()))
        finally:
            if own:
                conn.close()

    def token(self, conn, name):
        row = conn.execute("SELECT claim_token FROM webhook_dedup.keys WHERE source = %s AND idem_key = %s",
                           (self.source, self.key(name))).fetchone()
        if row is None:
            pytest.fail(f"no key {name}; seen: {self.seen}; the server log ends:\n{self.cluster.log_text()[-3000:]}")
        return row[0]

    def close(self):
        for conn in self._conns:
            conn.close()


def both_ways(cluster, scenario, **kwargs):
    """Run `scenario` with direct writes on and off; the two runs must have
    seen the same. Tokens and timestamps are left out of what is compared,
    and keys carry the mode as a prefix, which ROW strips."""
    seen = {}
    for mode in ("on", "off"):
        run = Run(cluster, mode)
        try:
            scenario(run, **kwargs)
        finally:
            run.close()
        seen[mode] = [(w, strip(r, run)) for w, r in run.seen]
    assert seen["on"] == seen["off"], "\n".join(
        f"{a!r}\n  on:  {b!r}\n  off: {c!r}" for (a, b), (_, c) in zip(seen["on"], seen["off"]) if b != c)
    return seen["on"]


def strip(rows, run):
    """Rows with the run's source and key prefix taken out of every text."""
    if not isinstance(rows, list):
        return rows
    return [tuple(v.replace(run.source, "SRC").replace(f"{run.mode}-", "", 1) if isinstance(v, str) else v
                  for v in r) for r in rows]


def claim(run, conn, name, payload=b"p", lease="1 minute"):
    return run.observe(f"claim {name}", conn,
                       "SELECT outcome, attempt, state, result::text, last_step FROM webhook_dedup.webhook_claim("
                       "%s, %s, %s, lease => %s::interval, event_type => 'e')",
                       (run.source, run.key(name), payload, lease))


def complete(run, conn, name, token, result='{"ok": true}'):
    return run.observe(f"complete {name}", conn, "SELECT webhook_dedup.webhook_complete(%s, %s, %s, %s::jsonb)",
                       (run.source, run.key(name), token, result))


# -- scenarios ---------------------------------------------------------------

def state_machine(run, isolation=None):
    """Every transition one after another, in one isolation level."""
    conn = run.connect(isolation)
    claim(run, conn, "a")
    claim(run, conn, "a")  # in progress
    token = run.token(conn, "a")
    complete(run, conn, "a", "00000000-0000-4000-8000-000000000000")  # stale
    complete(run, conn, "a", token)
    claim(run, conn, "a")  # duplicate
    claim(run, conn, "a", payload=b"other")  # conflict
    run.observe("claim_many", conn, "SELECT idem_key, outcome FROM webhook_dedup.webhook_claim_many(%s, %s)",
                (run.source, [run.key("m1"), run.key("m2")]))
    complete(run, conn, "m1", run.token(conn, "m1"))
    run.observe("fail", conn, "SELECT webhook_dedup.webhook_fail(%s, %s, %s, 'boom', retry_after => '0')",
                (run.source, run.key("m2"), run.token(conn, "m2")))
    claim(run, conn, "m2")  # reclaimed
    run.observe("checkpoint", conn, "SELECT webhook_dedup.webhook_checkpoint(%s, %s, %s, 'step-1')",
                (run.source, run.key("m2"), run.token(conn, "m2")))
    claim(run, conn, "x", lease="1 millisecond")
    time.sleep(0.01)
    stale = run.token(conn, "x")
    claim(run, conn, "x")  # reclaimed after the lease expired
    complete(run, conn, "x", stale)
    complete(run, conn, "x", run.token(conn, "x"))
    complete(run, conn, "nope", stale)  # unknown key: P0002
    run.rows()


def checkpoint_and_complete_in_one_statement(run):
    conn = run.connect()
    claim(run, conn, "k")
    token = run.token(conn, "k")
    run.observe("both", conn, "SELECT webhook_dedup.webhook_checkpoint(%s, %s, %s, 'charged'),"
                              "       webhook_dedup.webhook_complete(%s, %s, %s, '{\"n\": 1}')",
                (run.source, run.key("k"), token, run.source, run.key("k"), token))
    run.rows()


def a_row_written_earlier_in_the_statement(run):
    """A key written by the calling statement itself, under its own command
    id (here a superuser's insert in a data-modifying WITH), then claimed
    in the same statement: the SQL (SPI advances the command counter before
    each statement) finds it and answers; the direct path used to take the
    command id without advancing it and found the row invisible to lock
    (XX000). And webhook_enqueue (SQL) followed by a claim in one
    statement. (With a lease given, the claim reads nothing through SPI
    before it writes, so no SPI statement advances the counter for it.)"""
    conn = run.connect()
    run.observe("insert then claim", conn,
                """WITH k AS (INSERT INTO webhook_dedup.keys (source, idem_key, state, attempt, due_at, deliveries,
                                                             conflicts, first_seen_at, last_seen_at)
                              VALUES (%s, %s, 'pending', 0, now(), 1, 0, now(), now())
                              RETURNING source, idem_key)
                   SELECT c.outcome, c.attempt
                     FROM k, LATERAL webhook_dedup.webhook_claim(k.source, k.idem_key, lease => '1 minute') AS c""",
                (run.source, run.key("w")))
    run.observe("enqueue then claim", conn,
                "SELECT e, c.outcome, c.attempt FROM"
                " webhook_dedup.webhook_enqueue(%s, %s, 'payload'::bytea) AS e,"
                " LATERAL webhook_dedup.webhook_claim(%s, %s, 'payload'::bytea) AS c",
                (run.source, run.key("q"), run.source, run.key("q")))
    run.rows()


def a_stale_completion_does_not_block_the_holder(run):
    """A holder whose lease expired completes with its stale token in an
    open transaction; the key's new holder must not wait for it."""
    setup = run.connect()
    claim(run, setup, "held", lease="1 millisecond")
    stale = run.token(setup, "held")
    time.sleep(0.01)
    claim(run, setup, "held")
    fresh = run.token(setup, "held")
    old_holder = run.connect(autocommit=False)
    complete(run, old_holder, "held", stale)  # false, transaction still open
    holder = run.connect()
    holder.execute("SET statement_timeout = '3s'")
    complete(run, holder, "held", fresh)  # 57014 if it waited for the stale one
    old_holder.rollback()
    run.rows()


def repeatable_read_and_a_completed_key(run):
    """Under REPEATABLE READ, a stale holder completes a key that was
    reclaimed before its snapshot and completed after it: the UPDATE sees
    the reclaimed version, which its token does not match: false, not 40001."""
    setup = run.connect()
    claim(run, setup, "rr", lease="1 millisecond")
    stale = run.token(setup, "rr")
    time.sleep(0.01)
    claim(run, setup, "rr")
    fresh = run.token(setup, "rr")
    stale_holder = run.connect("repeatable read", autocommit=False)
    stale_holder.execute("SELECT 1")  # the snapshot
    complete(run, setup, "rr", fresh)
    complete(run, stale_holder, "rr", stale)
    stale_holder.rollback()
    # and the holder itself, whose lease a concurrent transaction changed
    # after its snapshot: 40001 both ways
    claim(run, setup, "rr2")
    token = run.token(setup, "rr2")
    holder = run.connect("repeatable read", autocommit=False)
    holder.execute("SELECT 1")
    run.observe("extend", setup, "SELECT webhook_dedup.webhook_extend_lease(%s, %s, %s, '2 minutes') IS NOT NULL",
                (run.source, run.key("rr2"), token))
    complete(run, holder, "rr2", token)
    holder.rollback()
    # the holder again, the key forgotten (deleted) after its snapshot: the
    # UPDATE meets the deletion, 40001 (not "no such key")
    claim(run, setup, "rr3")
    token = run.token(setup, "rr3")
    holder = run.connect("repeatable read", autocommit=False)
    holder.execute("SELECT 1")
    run.observe("forget", setup, "SELECT webhook_dedup.webhook_forget(%s, %s)", (run.source, run.key("rr3")))
    complete(run, holder, "rr3", token)
    holder.rollback()
    run.rows()


def two_first_deliveries_race(run):
    """Two connections claim one new key; the second waits for the first."""
    first = run.connect(autocommit=False)
    second = run.connect()
    claim(run, first, "race")
    answers = {}
    t = threading.Thread(target=lambda: answers.setdefault("second", second.execute(
        "SELECT outcome FROM webhook_dedup.webhook_claim(%s, %s)", (run.source, run.key("race"))).fetchone()))
    t.start()
    time.sleep(0.3)
    first.commit()
    t.join()
    run.seen.append(("second", answers["second"]))
    run.rows()


def serializable(run):
    state_machine(run, isolation="serializable")


@pytest.mark.parametrize("scenario", [state_machine, checkpoint_and_complete_in_one_statement,
                                      a_row_written_earlier_in_the_statement,
                                      a_stale_completion_does_not_block_the_holder,
                                      repeatable_read_and_a_completed_key, two_first_deliveries_race, serializable])
def test_the_same_answers_and_rows_both_ways(cluster, scenario):
    both_ways(cluster, scenario)


def test_a_stale_completion_takes_no_lock(cluster):
    """The scenario above, its answer spelled out: the holder completes."""
    seen = both_ways(cluster, a_stale_completion_does_not_block_the_holder)
    answers = [r for w, r in seen if w == "complete held"]
    assert answers == [[(False,)], [(True,)]], answers


def test_repeatable_read_answers_false_for_a_stale_token(cluster):
    seen = both_ways(cluster, repeatable_read_and_a_completed_key)
    answers = [r for w, r in seen if w in ("complete rr", "complete rr2", "complete rr3")]
    assert answers == [[(True,)], [(False,)], "40001", "40001"], answers


def test_a_row_written_earlier_in_the_statement_is_seen(cluster):
    seen = both_ways(cluster, a_row_written_earlier_in_the_statement)
    assert seen[0][1] != "XX000" and seen[1][1] == [("accepted", "claimed", 1)], seen


def test_extra_indexes_and_a_publication(cluster):
    """Indexes beside the primary key (one ON CONFLICT infers as an arbiter
    too, with a nondeterministic collation; one on another column, which
    the index-unchanged hint must leave correct), then a publication of
    updates without a replica identity (the UPDATE is refused, 55000)."""
    with cluster.connect() as conn:
        server_build.require(conn, "icu")
        conn.execute("CREATE COLLATION IF NOT EXISTS ci (provider = icu, locale = 'und-u-ks-level2',"
                     " deterministic = false)")
        conn.execute("CREATE UNIQUE INDEX keys_ci ON webhook_dedup.keys (source, idem_key COLLATE ci)")
        conn.execute("CREATE INDEX keys_attempt ON webhook_dedup.keys (attempt, last_step)")
    try:
        def case_variants(run):
            conn = run.connect()
            claim(run, conn, "Key")
            claim(run, conn, "KEY")  # the same key to the arbiter with collation ci
            claim(run, conn, "Key")
            complete(run, conn, "Key", run.token(conn, "Key"))
            run.rows()
            run.observe("index", conn, "SELECT count(*) FROM webhook_dedup.keys WHERE source = %s"
                                       " AND attempt = 1 AND last_step IS NULL", (run.source,))

        seen = both_ways(cluster, case_variants)
        assert [r for w, r in seen if w == "claim KEY"][0] in ("23505", [("in_progress", 1, "processing", None, None)])
    finally:
        with cluster.connect() as conn:
            conn.execute("DROP INDEX webhook_dedup.keys_ci")
            conn.execute("DROP INDEX webhook_dedup.keys_attempt")
    def published(run):
        conn = run.connect()
        claim(run, conn, "a")
        row = conn.execute("SELECT claim_token FROM webhook_dedup.keys WHERE source = %s", (run.source,)).fetchone()
        complete(run, conn, "a", row[0] if row else "00000000-0000-4000-8000-000000000000")
        claim(run, conn, "a")
        run.observe("enqueue", conn, "SELECT webhook_dedup.webhook_enqueue(%s, %s, 'p'::bytea)",
                    (run.source, run.key("q")))
        run.rows()

    # A publication of inserts only: updates need no replica identity, so
    # everything works, both ways.
    with cluster.connect() as conn:
        conn.execute("ALTER TABLE webhook_dedup.keys REPLICA IDENTITY NOTHING")
        conn.execute("CREATE PUBLICATION keys_pub FOR TABLE webhook_dedup.keys WITH (publish = 'insert')")
    try:
        seen = both_ways(cluster, published)
        assert ("claim a", [("claimed", 1, "processing", None, None)]) in seen, seen
        # Publishing updates too: every claim and completion is refused
        # (INSERT ... ON CONFLICT DO UPDATE and UPDATE check when they
        # start), both ways.
        with cluster.connect() as conn:
            conn.execute("ALTER PUBLICATION keys_pub SET (publish = 'insert, update')")
        seen = both_ways(cluster, published)
        assert [r for w, r in seen if w in ("claim a", "complete a")] == ["55000", "55000", "55000"], seen
    finally:
        with cluster.connect() as conn:
            conn.execute("DROP PUBLICATION keys_pub")
            conn.execute("ALTER TABLE webhook_dedup.keys REPLICA IDENTITY DEFAULT")
    # A column list that does not cover the replica identity (the primary
    # key): updates are refused, with 42P10 (PostgreSQL 15's column lists).
    with cluster.connect() as conn:
        conn.execute("CREATE PUBLICATION keys_cols FOR TABLE webhook_dedup.keys (source, state, attempt)")
    try:
        seen = both_ways(cluster, published)
        assert [r for w, r in seen if w == "complete a"] == ["42P10"], seen
    finally:
        with cluster.connect() as conn:
            conn.execute("DROP PUBLICATION keys_cols")


def test_key_columns_in_another_collation_and_a_type_modifier(cluster):
    """The key columns in a nondeterministic collation, and last_seen_at as
    timestamptz(0) (which rounds what the SQL writes): the direct path
    declines such a table (the layout check) and answers as the SQL does.
    The views over the columns go first (they pin the columns' types), and
    come back with a fresh install."""
    with cluster.connect() as conn:
        server_build.require(conn, "icu")
        conn.execute("CREATE COLLATION IF NOT EXISTS ci (provider = icu, locale = 'und-u-ks-level2',"
                     " deterministic = false)")
        conn.execute("DROP EXTENSION webhook_dedup")
        conn.execute("CREATE EXTENSION webhook_dedup")
        views = [v for (v,) in conn.execute(
            "SELECT c.oid::regclass::text FROM pg_class c WHERE c.relnamespace = 'webhook_dedup'::regnamespace"
            " AND c.relkind = 'v'").fetchall()]
        for view in views:
            conn.execute(f"ALTER EXTENSION webhook_dedup DROP VIEW {view}")
        for view in views:
            conn.execute(f"DROP VIEW IF EXISTS {view} CASCADE")
        conn.execute("ALTER TABLE webhook_dedup.keys ALTER COLUMN idem_key TYPE text COLLATE ci,"
                     " ALTER COLUMN last_seen_at TYPE timestamptz(0)")
    try:
        def rounded(run):
            conn = run.connect()
            claim(run, conn, "abc")
            claim(run, conn, "ABC")
            complete(run, conn, "abc", run.token(conn, "abc"))
            run.observe("rounded", conn, "SELECT bool_and(last_seen_at = date_trunc('second', last_seen_at))"
                                         " FROM webhook_dedup.keys WHERE source = %s", (run.source,))
            run.rows()

        seen = both_ways(cluster, rounded)
        assert ("rounded", [(True,)]) in seen
    finally:
        with cluster.connect() as conn:
            conn.execute("DROP EXTENSION webhook_dedup")
            conn.execute("CREATE EXTENSION webhook_dedup")


def test_partial_indexes_hold_exactly_their_rows_across_calls(cluster):
    """The compiled predicates of the keys table's partial indexes
    (keys_open, keys_expiry) are kept by the backend across calls and
    transactions (src/store/index_predicates.rs). One session claims,
    completes and fails keys over many transactions; amcheck then finds
    every row that satisfies an index's predicate in that index
    (heapallindexed), and a scan through each partial index returns exactly
    the rows a sequential scan does. Then, in the same session, keys_open is
    replaced by an index of the same name with another predicate, and an
    index is added whose predicate calls a PL/pgSQL function and one whose
    predicate reads the whole row (both compiled per call, not kept): the
    same checks hold for them, and the memory the session keeps for the
    predicates does not grow with further calls."""
    with cluster.connect() as conn:
        server_build.require(conn, "amcheck")
        conn.execute("DROP DATABASE IF EXISTS predicates WITH (FORCE)")
        conn.execute("CREATE DATABASE predicates")
    db = lambda: cluster.connect(dbname="predicates")  # noqa: E731
    with db() as admin:
        admin.execute("CREATE EXTENSION webhook_dedup")
        admin.execute("CREATE EXTENSION amcheck")
    indexes = {"keys_open": "state <> 'completed'", "keys_expiry": "state = 'completed'"}

    def check(admin):
        for index, predicate in indexes.items():
            admin.execute("SELECT bt_index_check(%s::regclass, heapallindexed => true)", (f"webhook_dedup.{index}",))
            admin.execute("SET enable_seqscan = off")
            admin.execute("SET enable_bitmapscan = off")
            query = f"SELECT count(*) FROM webhook_dedup.keys WHERE {predicate}"
            plan = "\n".join(r[0] for r in admin.execute(f"EXPLAIN {query}").fetchall())
            assert index in plan, plan
            through_index = admin.execute(query).fetchone()[0]
            admin.execute("RESET enable_seqscan")
            admin.execute("RESET enable_bitmapscan")
            admin.execute("SET enable_indexscan = off")
            admin.execute("SET enable_indexonlyscan = off")
            admin.execute("SET enable_bitmapscan = off")
            assert admin.execute(query).fetchone()[0] == through_index, index
            admin.execute("RESET ALL")

    def work(session, prefix, n=120):
        for i in range(n):
            key = f"{prefix}-{i}"
            token = session.execute("SELECT claim_token FROM webhook_dedup.webhook_claim('s', %s)", (key,)).fetchone()[0]
            if i % 3 == 0:
                session.execute("SELECT webhook_dedup.webhook_complete('s', %s, %s, '{}')", (key, token))
            elif i % 3 == 1:
                session.execute("SELECT webhook_dedup.webhook_fail('s', %s, %s, 'boom')", (key, token))

    with db() as session, db() as admin:
        session.execute("SET webhook_dedup.direct_writes = on")
        work(session, "a")
        check(admin)
        assert admin.execute("SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE state ="
                             " 'failed') FROM webhook_dedup.keys").fetchone() == (40, 40)
        admin.execute("DROP INDEX webhook_dedup.keys_open")
        admin.execute("CREATE INDEX keys_open ON webhook_dedup.keys (due_at) WHERE state = 'failed'")
        indexes["keys_open"] = "state = 'failed'"
        admin.execute("CREATE FUNCTION public.still_open(s text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE"
                      " AS $$ BEGIN RETURN s <> 'completed'; END $$")
        admin.execute("CREATE INDEX keys_custom ON webhook_dedup.keys (first_seen_at) WHERE public.still_open(state)")
        indexes["keys_custom"] = "public.still_open(state)"
        # a predicate on the whole row: compiled per call (its evaluation
        # keeps a tuple descriptor of the call's executor state)
        admin.execute("CREATE INDEX keys_whole ON webhook_dedup.keys (attempt) WHERE keys IS NOT NULL")
        indexes["keys_whole"] = "keys IS NOT NULL"
        work(session, "b")
        check(admin)
        if EDITION == "native":
            # what the session keeps for the predicates does not grow with its
            # calls (a predicate that is not kept leaves nothing behind; the
            # SQL edition writes through SQL only and keeps none)
            kept = ("SELECT sum(total_bytes) FROM pg_backend_memory_contexts"
                    " WHERE name LIKE 'webhook_dedup index predicate%'")
            before = session.execute(kept).fetchone()[0]
            assert before is not None
            work(session, "c", 300)
            assert session.execute(kept).fetchone()[0] == before
        else:
            work(session, "c", 300)
        check(admin)
    with cluster.connect() as conn:
        conn.execute("DROP DATABASE predicates WITH (FORCE)")
