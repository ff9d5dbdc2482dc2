"""The features that ran on one server only before issue 44, on a
distributed install: each answers as on one server, through the
coordinator and on the workers, with the roles of docs/security.md
checked with real logins.

- pause and resume (docs/operations.md, "Pausing a source"): a pause made
  on the coordinator reaches every node (webhook_dedup.sources is a
  reference table); webhook_next, on the coordinator and on both workers,
  takes none of the paused source's keys and parks one that became due
  during the pause, while another source's keys go on; resume makes them
  due again in their first order; a resume waits for a webhook_next that
  is parking a key of the source (it holds its node's copy of the source's
  row FOR SHARE), so nothing stays parked behind it; a login without
  webhook_dedup_operator gets 42501 and changes nothing;
- unseen and reconcile (docs/operations.md, reconciliation): the answers of
  tests/pg_regress/sql/operator.sql's section 5, from every node, with the
  roles; through the coordinator each call is delegated to the owner.
"""

import threading
import time

import psycopg
import pytest

from test_distributed import distributed, one, placement_port  # noqa: F401 (fixture)

OPERATOR = "wd_feature_operator"
OUTSIDER = "wd_feature_outsider"
RECEIVER = "wd_feature_receiver"


@pytest.fixture(scope="module")
def logins(distributed):
    """Three logins made on the coordinator (Citus propagates roles and
    grants to every node): an operator, a receiver (webhook_dedup_receiver)
    and one without any of the extension's roles."""
    with distributed.connect() as conn:
        for name, role in ((OPERATOR, "webhook_dedup_operator"), (RECEIVER, "webhook_dedup_receiver"),
                           (OUTSIDER, None)):
            conn.execute(f"DROP ROLE IF EXISTS {name}")
            conn.execute(f"CREATE ROLE {name} LOGIN")
            if role:
                conn.execute(f"GRANT {role} TO {name}")
    return distributed


def enqueue(conn, source, keys):
    for key in keys:
        assert one(conn, "SELECT webhook_dedup.webhook_enqueue(%s, %s, %s::bytea)",
                   (source, key, key.encode())) == "accepted"


def take_all(conn, source=None) -> list:
    """Every key webhook_next hands out now (source: one source's, else any
    source's), completed at once."""
    taken = []
    while True:
        rows = conn.execute("SELECT source, idem_key, claim_token FROM webhook_dedup.webhook_next(%s, batch => 10)",
                            (source,)).fetchall()
        if not rows:
            return taken
        for s, k, token in rows:
            assert one(conn, "SELECT webhook_dedup.webhook_complete(%s, %s, %s)", (s, k, token)) is True
            taken.append((s, k))


def paused_keys(conn, source) -> int:
    return one(conn, "SELECT count(*) FROM webhook_dedup.keys WHERE source = %s AND due_at = 'infinity'", (source,))


def test_pause_and_resume_reach_every_node(logins):
    cluster = logins
    paused, other = "pause-src", "pause-other"
    with cluster.connect() as conn:
        enqueue(conn, paused, ["a1", "a2", "a3"])
        enqueue(conn, other, ["b1"])
    # a login without the operator role changes nothing
    for user in (OUTSIDER, RECEIVER):
        with cluster.connect(user=user) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT webhook_dedup.pause(%s, 'not mine')", (paused,))
    with cluster.connect() as conn:
        assert one(conn, "SELECT count(*) FROM webhook_dedup.sources WHERE source = %s AND paused_at IS NOT NULL",
                   (paused,)) == 0
    with cluster.connect(user=OPERATOR) as conn:
        assert one(conn, "SELECT webhook_dedup.pause(%s, 'deploy')", (paused,)) == 3
        # pausing again keeps the first pause and counts no key twice
        assert one(conn, "SELECT webhook_dedup.pause(%s, 'still deploying')", (paused,)) == 0
    # every node's copy of the row says so, by whom
    for node in cluster.nodes:
        with node.connect() as conn:
            assert conn.execute("SELECT paused_by, pause_reason FROM webhook_dedup.sources WHERE source = %s",
                                (paused,)).fetchone() == (OPERATOR, "still deploying"), node.name
    # a delivery enqueued during the pause is intake: stored, then parked by
    # the webhook_next that meets it
    with cluster.workers[0].connect() as conn:
        enqueue(conn, paused, ["a4"])
    # webhook_next on every node hands out the other source only (of these
    # two: keys the earlier tests of the session left due go too)
    taken = []
    for node in cluster.nodes:
        with node.connect() as conn:
            taken += take_all(conn)
            assert take_all(conn, paused) == [], node.name
    assert [t for t in taken if t[0] in (paused, other)] == [(other, "b1")]
    with cluster.connect() as conn:
        assert paused_keys(conn, paused) == 4
        assert one(conn, "SELECT paused_keys FROM webhook_dedup.key_states WHERE source = %s", (paused,)) == 4
    with cluster.connect(user=OUTSIDER) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT webhook_dedup.resume(%s)", (paused,))
    with cluster.connect(user=OPERATOR) as conn:
        assert one(conn, "SELECT webhook_dedup.resume(%s)", (paused,)) == 4
    with cluster.workers[1].connect() as conn:
        assert conn.execute("SELECT paused_at FROM webhook_dedup.sources WHERE source = %s",
                            (paused,)).fetchone() == (None,)
        # due again in their first order
        assert take_all(conn, paused) == [(paused, k) for k in ("a1", "a2", "a3", "a4")]


def test_a_resume_waits_for_a_webhook_next_that_is_parking_a_key(logins):
    """A webhook_next on the owner, in a transaction left open, meets a key
    of the paused source that became due and parks it, holding its node's
    copy of the source's row FOR SHARE; a resume through the coordinator
    waits for that transaction, then finds the parked key and unparks it."""
    cluster = logins
    source = "park-race"
    with cluster.connect() as conn:
        owner = cluster.worker_at(placement_port(conn, "keys", source))
        assert one(conn, "SELECT webhook_dedup.pause(%s)", (source,)) == 0
        enqueue(conn, source, ["k"])
    taker = owner.connect(autocommit=False)
    try:
        assert taker.execute("SELECT * FROM webhook_dedup.webhook_next(%s)", (source,)).fetchall() == []
        resumed = {}

        def resume():
            with cluster.connect(user=OPERATOR) as conn:
                resumed["count"] = one(conn, "SELECT webhook_dedup.resume(%s)", (source,))
                resumed["at"] = time.monotonic()

        thread = threading.Thread(target=resume)
        thread.start()
        time.sleep(1.5)
        assert "count" not in resumed, "resume waits for the webhook_next that holds the source's row"
        released = time.monotonic()
        taker.commit()
        thread.join(60)
        assert resumed.get("count") == 1 and resumed["at"] > released, resumed
    finally:
        taker.close()
    with cluster.connect() as conn:
        assert paused_keys(conn, source) == 0
        assert take_all(conn, source) == [(source, "k")]


def test_unseen_and_reconcile_answer_as_on_one_server_on_every_node(logins):
    """The reconciliation of tests/pg_regress/sql/operator.sql (section 5),
    on a distributed install, made from each node in turn (the coordinator
    and both workers, whichever holds the source): unseen lists the ids
    without a key, in the order given, each once; reconcile enqueues one
    fetched from the provider's API (accepted), answers duplicate or
    conflict for a key that exists, and the workers' webhook_next hands the
    reconciled keys out; a reader may call unseen, a receiver reconcile,
    and a login without either role neither (42501)."""
    cluster = logins
    with cluster.connect() as conn:
        conn.execute("DROP ROLE IF EXISTS wd_feature_reader")
        conn.execute("CREATE ROLE wd_feature_reader LOGIN IN ROLE webhook_dedup_reader")
    for n, node in enumerate(cluster.nodes):
        source = f"recon-{n}"
        with node.connect() as conn:
            assert one(conn, "SELECT webhook_dedup.webhook_enqueue(%s, webhook_dedup.webhook_key(%s, 'evt_1'),"
                             " '{}'::bytea)", (source, source)) == "accepted"
        with node.connect(user="wd_feature_reader") as conn:
            assert conn.execute("SELECT * FROM webhook_dedup.unseen(%s, ARRAY['evt_3', 'evt_1', 'evt_2', 'evt_3'])",
                                (source,)).fetchall() == [("evt_3",), ("evt_2",)], node.name
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT webhook_dedup.reconcile(%s, 'evt_2', '{}'::bytea)", (source,))
        with node.connect(user=OUTSIDER) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT * FROM webhook_dedup.unseen(%s, ARRAY['evt_1'])", (source,))
        with node.connect(user=RECEIVER) as conn:
            assert conn.execute(
                "SELECT webhook_dedup.reconcile(%s, 'evt_2', convert_to('{\"id\":\"evt_2\"}', 'UTF8'),"
                "                               event_type => 'order.paid'),"
                "       webhook_dedup.reconcile(%s, 'evt_1', '{}'::bytea),"
                "       webhook_dedup.reconcile(%s, 'evt_1', '{\"other\":true}'::bytea)",
                (source, source, source)).fetchone() == ("accepted", "duplicate", "conflict"), node.name
        with node.connect() as conn:
            assert conn.execute("SELECT * FROM webhook_dedup.unseen(%s, ARRAY['evt_3', 'evt_1', 'evt_2'])",
                                (source,)).fetchall() == [("evt_3",)], node.name
            assert conn.execute("SELECT * FROM webhook_dedup.unseen(%s, ARRAY['evt_1'], account => 'acct_1')",
                                (source,)).fetchall() == [("evt_1",)], node.name
            assert conn.execute("SELECT reconciled_at IS NOT NULL FROM webhook_dedup.keys"
                                " WHERE source = %s ORDER BY idem_key", (source,)).fetchall() == [(False,), (True,)]
            assert conn.execute("SELECT idem_key, convert_from(payload, 'UTF8'), event_type"
                                "  FROM webhook_dedup.webhook_next(%s, batch => 10) ORDER BY idem_key",
                                (source,)).fetchall() == [(f"{source}:evt_1", "{}", None),
                                                          (f"{source}:evt_2", '{"id":"evt_2"}', "order.paid")]
            for query, state in (("SELECT * FROM webhook_dedup.unseen(NULL, ARRAY['e'])", "22004"),
                                 ("SELECT * FROM webhook_dedup.unseen('recon-0', ARRAY['e', NULL])", "22004"),
                                 ("SELECT * FROM webhook_dedup.unseen('recon-0', ARRAY[''])", "22023"),
                                 ("SELECT webhook_dedup.reconcile('recon-0', 'evt_9', NULL)", "22004"),
                                 ("SELECT webhook_dedup.reconcile('recon-0', '', '{}'::bytea)", "22023")):
                with pytest.raises(psycopg.Error) as raised:
                    conn.execute(query)
                assert raised.value.sqlstate == state, (node.name, query, raised.value)


def test_unseen_and_reconcile_are_delegated_to_the_owner(logins):
    """Through the coordinator, a call of unseen or reconcile alone in its
    statement goes to the node that holds the source as the call itself,
    one round trip (Citus's citus.log_remote_commands shows what the
    coordinator sends: the call, not its statements), as distribute()
    registers them (src/sql/distribute.sql)."""
    cluster = logins
    source = "recon-delegated"
    with cluster.connect() as conn:
        owner = placement_port(conn, "keys", source)
        sent = []
        conn.add_notice_handler(lambda d: sent.append(d.message_primary))
        conn.execute("SET citus.log_remote_commands = on")
        assert one(conn, "SELECT webhook_dedup.reconcile(%s, 'evt_1', '{}'::bytea)", (source,)) == "accepted"
        assert conn.execute("SELECT * FROM webhook_dedup.unseen(%s, ARRAY['evt_1', 'evt_2'])",
                            (source,)).fetchall() == [("evt_2",)]
    issued = [m for m in sent if m.startswith("issuing ")]
    assert any("webhook_dedup.reconcile(" in m for m in issued), issued
    assert any("webhook_dedup.unseen(" in m for m in issued), issued
    assert not any("webhook_dedup.keys_" in m for m in issued), "no statement of theirs was routed from here"
    with cluster.worker_at(owner).connect() as conn:
        assert one(conn, "SELECT reconciled_at IS NOT NULL FROM webhook_dedup.keys WHERE source = %s",
                   (source,))
