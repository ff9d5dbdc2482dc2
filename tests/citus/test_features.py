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
  webhook_dedup_operator gets 42501 and changes nothing.
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
    # webhook_next on every node hands out the other source only
    taken = []
    for node in cluster.nodes:
        with node.connect() as conn:
            taken += take_all(conn)
            assert take_all(conn, paused) == [], node.name
    assert taken == [(other, "b1")]
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
