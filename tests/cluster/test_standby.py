"""Calls on a hot standby, and calls that write nothing.

On a standby every stateful call raised XX000 "cannot assign TransactionIds
during recovery", even a webhook_receive whose signature fails: the check
of the extension's version that a backend makes before its first statement
read pg_extension through pgrx's `Spi::get_one`, which takes a transaction
id to mark the transaction as writing (src/spi.rs, `select_one`). On the
primary the same check spent a transaction id per new backend, even in a
READ ONLY transaction. Now:

- on a real streaming standby, every call that would write is refused with
  25006 (read_only_sql_transaction), as in a read-only transaction on the
  primary; a delivery whose signature fails is answered verified = false;
  verification, key derivation, the views and run_maintenance() (ran =
  false) answer;
- on the primary, a call that writes nothing takes no transaction id, in a
  fresh backend (whose first statement checks the version).
"""

import psycopg
import pytest

from own_cluster import OwnCluster, Standby

GITHUB_BODY = b'{"zen": "Keep it logically awesome."}'


@pytest.fixture(scope="module")
def pair():
    primary = OwnCluster({"webhook_dedup.database": "'postgres'"}, prefix="webhook_dedup_primary.")
    standby = None
    try:
        with primary.connect() as conn:
            conn.execute("CREATE EXTENSION webhook_dedup")
            conn.execute("SELECT webhook_dedup.add_secret('github', 'It''s a Secret to Everybody')")
            tok = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim('s', 'done')").fetchone()[0]
            conn.execute("SELECT webhook_dedup.webhook_complete('s', 'done', %s, '{\"status\": 200}')", (tok,))
            conn.execute("SELECT webhook_dedup.webhook_claim('s', 'held', lease => '1 hour')")
        standby = Standby(primary)
        standby.wait_for_replay(primary)
        yield primary, standby
    finally:
        if standby:
            standby.destroy()
        primary.destroy()


def signed_headers(conn, secret="It's a Secret to Everybody"):
    (headers,) = conn.execute("SELECT webhook_dedup.webhook_sign('github', %s, %s)"
                              " || '{\"X-GitHub-Delivery\": \"d-1\", \"X-GitHub-Event\": \"ping\"}'",
                              (GITHUB_BODY, secret)).fetchone()
    return psycopg.types.json.Jsonb(headers)


# Every call that writes, each made as the first statement of a new backend
# on the standby (where the version check used to fail first).
WRITES = [
    "SELECT * FROM webhook_dedup.webhook_claim('s', 'new')",
    "SELECT * FROM webhook_dedup.webhook_claim('s', 'done')",
    "SELECT * FROM webhook_dedup.webhook_claim_many('s', ARRAY['a', 'b'])",
    "SELECT webhook_dedup.webhook_complete('s', 'held', gen_random_uuid())",
    "SELECT webhook_dedup.webhook_fail('s', 'held', gen_random_uuid(), 'e')",
    "SELECT webhook_dedup.webhook_mark_unknown('s', 'held', gen_random_uuid())",
    "SELECT webhook_dedup.webhook_checkpoint('s', 'held', gen_random_uuid(), 'step')",
    "SELECT webhook_dedup.webhook_extend_lease('s', 'held', gen_random_uuid(), '1 minute')",
    "SELECT webhook_dedup.webhook_resolve('s', 'held', 'completed')",
    "SELECT webhook_dedup.webhook_forget('s', 'done')",
    "SELECT * FROM webhook_dedup.webhook_enqueue('s', 'q', 'p'::bytea)",
    "SELECT * FROM webhook_dedup.webhook_next('s')",
    "SELECT webhook_dedup.webhook_advance('s', 'e', now())",
    "SELECT webhook_dedup.add_secret('other', 'secret')",
]


@pytest.mark.parametrize("call", WRITES)
def test_a_write_on_the_standby_is_25006(pair, call):
    _, standby = pair
    with standby.connect() as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]
    with standby.connect() as conn:  # a new backend: the version check runs first
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute(call)


def test_a_signed_delivery_on_the_standby_is_25006_and_a_forged_one_is_refused(pair):
    primary, standby = pair
    with primary.connect() as conn:
        headers = signed_headers(conn)
        forged = signed_headers(conn, secret="not the secret")
    with standby.connect() as conn:
        row = conn.execute("SELECT verified, reject_reason, outcome FROM webhook_dedup.webhook_receive("
                           "'github', %s, %s)", (GITHUB_BODY, forged)).fetchone()
        assert row == (False, "no_matching_signature", None)
    with standby.connect() as conn:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("SELECT * FROM webhook_dedup.webhook_receive('github', %s, %s)", (GITHUB_BODY, headers))


def test_what_reads_answers_on_the_standby(pair):
    primary, standby = pair
    with primary.connect() as conn:
        headers = signed_headers(conn)
    with standby.connect() as conn:
        assert conn.execute("SELECT webhook_dedup.webhook_verify('github', %s, %s, ARRAY[%s])",
                            (GITHUB_BODY, headers, "It's a Secret to Everybody")).fetchone()[0] is True
        assert conn.execute("SELECT webhook_dedup.webhook_key('s', 'id')").fetchone()[0] == "s:id"
        assert conn.execute("SELECT keys FROM webhook_dedup.key_states WHERE source = 's' AND state = 'processing'"
                            ).fetchone()[0] == 1
        assert conn.execute("SELECT state FROM webhook_dedup.key_history WHERE idem_key = 'done'").fetchone()[0] \
            == "completed"
        assert conn.execute("SELECT ran FROM webhook_dedup.run_maintenance()").fetchone()[0] is False


def test_a_call_that_writes_nothing_takes_no_transaction_id(pair):
    """On the primary, in new backends: a rejected delivery, a verification
    and a key derivation leave the transaction without an id; in a READ
    ONLY transaction a claim is 25006 (before: XX000 on a standby, and an id
    taken here)."""
    primary, _ = pair
    with primary.connect() as conn:
        forged = signed_headers(conn, secret="not the secret")
    for call, args in (
        ("SELECT verified FROM webhook_dedup.webhook_receive('github', %s, %s)", (GITHUB_BODY, forged)),
        ("SELECT webhook_dedup.webhook_verify('github', %s, %s, ARRAY['s'])", (GITHUB_BODY, forged)),
        ("SELECT webhook_dedup.webhook_key('s', 'id')", ()),
        ("SELECT count(*) FROM webhook_dedup.key_states", ()),
    ):
        with primary.connect(autocommit=False) as conn:
            conn.execute(call, args)
            assert conn.execute("SELECT pg_current_xact_id_if_assigned()").fetchone()[0] is None, call
            conn.rollback()
    with primary.connect(autocommit=False) as conn:
        conn.execute("SET TRANSACTION READ ONLY")
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("SELECT * FROM webhook_dedup.webhook_claim('s', 'read-only')")
