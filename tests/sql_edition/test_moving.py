"""Moving between editions keeps every key (issue 43, item 7): a database
using one edition, with keys in every state (pending with its payload,
processing under a lease, completed with a result, failed awaiting a
retry, dead-lettered, unknown outcome), a recorded conflict, an outbox
intent, a source's settings and a replay guard, is dumped with pg_dump and
restored with pg_restore into a server of the other edition; the tables
are then equal, and the keys go on as they were: a duplicate of the
completed key answers its result, the lease's holder completes with its
token, a worker takes the pending key.

- native to SQL (leaving a self-hosted server for RDS, Aurora or
  Supabase): the SQL edition is registered with pg_tle in the new
  database first (pg_tle's install is per database), then the whole dump
  is restored: its `CREATE EXTENSION webhook_dedup` creates the SQL
  edition, and the data of its configuration tables follows.
- SQL to native: the dump holds pg_tle's own objects (its schema and the
  registration of webhook_dedup), which a server without pg_tle has no
  use for: they are left out of the restore (`pg_restore -L`), the rest
  restored as it is.
"""

import os
import subprocess
import uuid

import pytest

DB = "moving"

FILL = [
    "SELECT webhook_dedup.webhook_claim('s', 's:processing', 'a'::bytea, '1 hour')",
    "SELECT webhook_dedup.webhook_complete('s', 's:done', (webhook_dedup.webhook_claim('s', 's:done', 'd'::bytea))"
    ".claim_token, '{\"ok\": 1}')",
    "SELECT webhook_dedup.webhook_claim('s', 's:done', 'other'::bytea)",  # a conflict, recorded
    "SELECT webhook_dedup.webhook_fail('s', 's:failed', (webhook_dedup.webhook_claim('s', 's:failed')).claim_token,"
    " 'boom', retry_after => '1 hour')",
    "SELECT webhook_dedup.webhook_mark_unknown('s', 's:unknown', (webhook_dedup.webhook_claim('s', 's:unknown'))"
    ".claim_token, 'timeout')",
    "SELECT webhook_dedup.webhook_fail('s', 's:dead', (webhook_dedup.webhook_claim('s', 's:dead')).claim_token,"
    " 'boom', retryable => false)",
    "SELECT webhook_dedup.webhook_enqueue('s', 's:pending', 'payload'::bytea, 'push', '{\"x-id\": [\"1\"]}')",
    "SELECT webhook_dedup.webhook_outbox_put('s', 's:processing', (SELECT claim_token FROM webhook_dedup.keys"
    " WHERE idem_key = 's:processing'), 'refund', 'stripe', '{\"amount\": 1}')",
    "INSERT INTO webhook_dedup.sources (source, max_attempts, keep_payload) VALUES ('t', 3, true)",
    # a delivery through webhook_receive: its key and its replay guard
    "SELECT webhook_dedup.webhook_receive('github', '{\"n\": 1}'::bytea, webhook_dedup.webhook_sign('github',"
    " '{\"n\": 1}'::bytea, 's3cret') || '{\"X-GitHub-Delivery\": \"d1\"}', ARRAY['s3cret'], wait => '0')",
]

# what must be equal after the move (every column a restore carries)
TABLES = [
    "SELECT source, idem_key, state, attempt, claim_token, lease_expires_at, next_attempt_at, due_at, fingerprint,"
    " event_type, result, last_step, last_error, deliveries, conflicts, first_seen_at, last_seen_at, completed_at,"
    " expires_at, leased_at FROM webhook_dedup.keys ORDER BY 1, 2",
    "SELECT source, idem_key, stored_fingerprint, fingerprint, via, seen_at FROM webhook_dedup.conflict_log ORDER BY 1, 2",
    "SELECT source, idem_key, payload, headers FROM webhook_dedup.payloads ORDER BY 1, 2",
    "SELECT id, source, idem_key, operation, target, request, downstream_key, state, lease_token"
    " FROM webhook_dedup.outbox ORDER BY id",
    "SELECT source, max_attempts, keep_payload FROM webhook_dedup.sources ORDER BY 1",
    "SELECT source, body_sha256, idem_key FROM webhook_dedup.replay_guards ORDER BY 1, 2",
]


def run(args):
    done = subprocess.run(args, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(args[:2])} failed:\n{done.stderr[-3000:]}"
    return done.stdout


def tools():
    return os.path.join(os.environ["WEBHOOK_DEDUP_PG_BIN"], "pg_dump"), \
        os.path.join(os.environ["WEBHOOK_DEDUP_PG_BIN"], "pg_restore")


def new_database(edition):
    with edition.connect() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB}")
        conn.execute(f"CREATE DATABASE {DB}")


def install(edition):
    """The edition in a new database, as a user installs it."""
    new_database(edition)
    if edition.name == "native":
        with edition.connect(dbname=DB) as conn:
            conn.execute("CREATE EXTENSION webhook_dedup")
        return
    register_sql_edition(edition)
    with edition.connect(dbname=DB) as conn:
        conn.execute("CREATE EXTENSION webhook_dedup")


def register_sql_edition(edition):
    with edition.connect(dbname=DB) as conn:
        conn.execute("CREATE EXTENSION pg_tle")
    edition.psql_file(os.environ["WEBHOOK_DEDUP_SQL_EDITION_TLE"], DB)


def tables(edition):
    with edition.connect(dbname=DB) as conn:
        return [conn.execute(q).fetchall() for q in TABLES]


def move(source, target, tmp_path):
    pg_dump, pg_restore = tools()
    dump = tmp_path / "moving.dump"
    run([pg_dump, "-Fc", "-h", str(source.dir), "-U", "postgres", "-d", DB, "-f", str(dump)])
    new_database(target)
    restore = [pg_restore, "-h", str(target.dir), "-U", "postgres", "-d", DB, "--exit-on-error"]
    if target.name == "sql":
        register_sql_edition(target)
    else:
        listing = tmp_path / "restore.list"
        entries = run([pg_restore, "-l", str(dump)]).splitlines()
        listing.write_text("\n".join(e for e in entries if "pg_tle" not in e and "pgtle" not in e) + "\n")
        restore += ["-L", str(listing)]
    run([*restore, str(dump)])


@pytest.mark.parametrize("direction", ["native to SQL", "SQL to native"])
def test_pg_dump_moves_every_key_between_editions(native, sql, tmp_path, direction):
    source, target = (native, sql) if direction == "native to SQL" else (sql, native)
    install(source)
    with source.connect(dbname=DB) as conn:
        for statement in FILL:
            conn.execute(statement)
        states = {r[0] for r in conn.execute("SELECT state FROM webhook_dedup.keys")}
        assert states == {"pending", "processing", "completed", "failed", "dead_lettered", "unknown_outcome"}, states
        token = conn.execute("SELECT claim_token FROM webhook_dedup.keys WHERE idem_key = 's:processing'").fetchone()[0]
    before = tables(source)
    move(source, target, tmp_path)
    after = tables(target)
    for query, x, y in zip(TABLES, before, after):
        assert x == y, f"{direction}: {query}\n  before: {x}\n  after: {y}"
    with target.connect(dbname=DB) as conn:
        assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'webhook_dedup'").fetchone()
        # the keys go on where they were
        assert conn.execute("SELECT outcome, result FROM webhook_dedup.webhook_claim('s', 's:done', 'd'::bytea)") \
            .fetchone() == ("duplicate", {"ok": 1})
        assert conn.execute("SELECT webhook_dedup.webhook_complete('s', 's:processing', %s)", (token,)).fetchone()[0]
        assert conn.execute("SELECT outcome FROM webhook_dedup.webhook_claim('s', 's:failed')").fetchone()[0] \
            == "retry_later"
        taken = conn.execute("SELECT idem_key, payload FROM webhook_dedup.webhook_next('s', '1 hour', 5)").fetchall()
        assert taken == [("s:pending", b"payload")], taken
        got = conn.execute("SELECT outcome FROM webhook_dedup.webhook_receive('github', '{\"n\": 1}'::bytea,"
                           " webhook_dedup.webhook_sign('github', '{\"n\": 1}'::bytea, 's3cret')"
                           " || '{\"X-GitHub-Delivery\": \"d2\"}', ARRAY['s3cret'], wait => '0')").fetchone()[0]
        assert got == "in_progress", "the replay guard moved with the keys: the body is d1's"
        assert isinstance(token, uuid.UUID)
    for edition in (source, target):
        with edition.connect() as conn:
            conn.execute(f"DROP DATABASE {DB}")
