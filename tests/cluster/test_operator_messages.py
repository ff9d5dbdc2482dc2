"""What an operator is told at the moment it matters.

A newcomer on call against 0.3.0 got 42501 reading why a redrive skipped a
key, a redrive that would skip every key without a word, an empty export
without a word, `running, moved 0` for a redrive held by a pause, and
`no idempotency key "evt_..."` for a bare event id without a pointer to
webhook_key. Each is checked here through psycopg's diagnostics (the
NOTICE or HINT as a client gets it), as a real operator login where a
privilege is involved.
"""

import uuid

import psycopg
import pytest


@pytest.fixture()
def notices(connect):
    conn = connect()
    seen = []
    conn.add_notice_handler(lambda d: seen.append((d.message_primary, d.message_hint)))
    yield conn, seen
    conn.close()


def source_name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def dead_letter(conn, source, key, payload=b"body"):
    token = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim(%s, %s, %s)",
                         (source, key, payload)).fetchone()[0]
    conn.execute("SELECT webhook_dedup.webhook_fail(%s, %s, %s, 'broken', retryable => false)", (source, key, token))


def test_a_redrive_says_at_once_which_keys_it_cannot_redrive(notices):
    conn, seen = notices
    source = source_name("claimed")  # keeps no payloads: claim-mode keys have none
    for key in ("a", "b"):
        dead_letter(conn, source, key)
    conn.execute("SELECT webhook_dedup.webhook_enqueue(%s, 'q', 'kept'::bytea)", (source,))
    token = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_next(%s)", (source,)).fetchone()[0]
    conn.execute("SELECT webhook_dedup.webhook_fail(%s, 'q', %s, 'broken', retryable => false)", (source, token))
    matched = conn.execute("SELECT matched FROM webhook_dedup.redrive(%s, dry_run => true)", (source,)).fetchone()[0]
    assert matched == 3
    messages = [m for m, _ in seen]
    assert f'source "{source}" keeps no payloads (webhook_dedup.sources.keep_payload is not on)' in messages
    assert "2 of the 3 keys matched have no payload to redrive: the run will skip them as no_payload" in messages
    hints = dict(seen)
    assert "webhook_dedup.redrive_keys" in hints[messages[-1]]
    # a source that keeps them, and whose keys all have one: no word
    kept = source_name("kept")
    conn.execute("INSERT INTO webhook_dedup.sources (source, keep_payload) VALUES (%s, true)", (kept,))
    conn.execute("SELECT * FROM webhook_dedup.run_maintenance()")  # the archive's day partitions
    dead_letter(conn, kept, "a")
    seen.clear()
    assert conn.execute("SELECT matched FROM webhook_dedup.redrive(%s, dry_run => true)", (kept,)).fetchone()[0] == 1
    assert seen == []
    conn.execute("DELETE FROM webhook_dedup.sources WHERE source = %s", (kept,))


def test_an_empty_export_of_a_source_without_payloads_says_why(notices):
    conn, seen = notices
    source = source_name("unkept")
    dead_letter(conn, source, "a")
    rows = conn.execute("SELECT * FROM webhook_dedup.export_deliveries(%s, now() - interval '1 day', now())",
                        (source,)).fetchall()
    assert rows == []
    assert (f'source "{source}" keeps no payloads (webhook_dedup.sources.keep_payload is not on)' in
            [m for m, _ in seen])


def test_a_redrive_held_by_a_pause_says_paused(connect):
    source = source_name("paused")
    with connect() as conn:
        conn.execute("INSERT INTO webhook_dedup.sources (source, keep_payload) VALUES (%s, true)", (source,))
        conn.execute("SELECT * FROM webhook_dedup.run_maintenance()")
        dead_letter(conn, source, "a")
        conn.execute("SELECT webhook_dedup.pause(%s, 'crm down')", (source,))
        run = conn.execute("SELECT run FROM webhook_dedup.redrive(%s)", (source,)).fetchone()[0]
        conn.execute("SELECT * FROM webhook_dedup.run_maintenance()")
        status = lambda: conn.execute("SELECT status, moved FROM webhook_dedup.redrive_runs WHERE id = %s",  # noqa: E731
                                      (run,)).fetchone()
        assert status() == ("paused", 0)
        conn.execute("SELECT webhook_dedup.resume(%s)", (source,))
        assert status() == ("running", 0)
        conn.execute("SELECT * FROM webhook_dedup.run_maintenance()")
        assert status() == ("done", 1)
        conn.execute("DELETE FROM webhook_dedup.sources WHERE source = %s", (source,))


def test_an_operator_reads_why_a_redrive_skipped_a_key(connect):
    source = source_name("skipped")
    login = "t_issue41_operator"
    with connect() as conn:
        conn.execute(f"DROP ROLE IF EXISTS {login}")
        conn.execute(f"CREATE ROLE {login} LOGIN IN ROLE webhook_dedup_operator")
        try:
            dead_letter(conn, source, "a")
            run = conn.execute("SELECT run FROM webhook_dedup.redrive(%s)", (source,)).fetchone()[0]
            conn.execute("SELECT * FROM webhook_dedup.run_maintenance()")
            with psycopg.connect(user=login, autocommit=True) as operator:
                outcome = operator.execute("SELECT idem_key, outcome FROM webhook_dedup.redrive_keys WHERE run = %s",
                                           (run,)).fetchall()
            assert outcome == [("a", "no_payload")]
        finally:
            conn.execute(f"DROP ROLE {login}")


def test_a_bare_event_id_is_hinted_at_webhook_key(connect):
    with connect() as conn:
        for call in ("SELECT webhook_dedup.webhook_complete('stripe', 'evt_41', gen_random_uuid())",
                     "SELECT webhook_dedup.webhook_fail('stripe', 'evt_41', gen_random_uuid(), 'e')",
                     "SELECT webhook_dedup.webhook_outbox_put('stripe', 'evt_41', gen_random_uuid(), 'op', 't', '{}')"):
            with pytest.raises(psycopg.errors.NoDataFound) as caught:
                conn.execute(call)
            assert caught.value.diag.message_primary == 'no idempotency key "evt_41" for source "stripe"'
            assert "webhook_dedup.webhook_key('stripe', 'evt_41')" in caught.value.diag.message_hint, call
        # a key of the source's own shape gets no hint: it is simply unknown
        with pytest.raises(psycopg.errors.NoDataFound) as caught:
            conn.execute("SELECT webhook_dedup.webhook_complete('stripe', 'stripe:evt_41', gen_random_uuid())")
        assert caught.value.diag.message_hint is None
