"""Where erased bytes remain, and making a redaction final on the primary
(webhook_dedup.purge_redactions), checked by scanning the database's data
files for markers.

`redact` deletes the payloads and archived deliveries and sets the keys'
results to NULL. PostgreSQL leaves the old row versions' bytes in their
pages (heap and TOAST) until the space is reused: VACUUM marks the space
free, it does not wipe it. Found by attacking 0.3.0 with pageinspect; here
by reading the files: after redact and two VACUUMs and a CHECKPOINT the
markers are still there. purge_redactions rewrites each relation a
redaction erased from (CLUSTER), after which no file of the database holds
them: payloads and archive by default, the keys' erased results with
include_keys. It refuses while a snapshot from before the redaction could
still read the erased rows (the rewrite would copy them).

Runs in a database of its own on the test cluster, whose directory
(base/<oid>) is scanned; WEBHOOK_DEDUP_PGDATA comes from scripts/test.sh.
"""

import os
import secrets
from pathlib import Path

import psycopg
import pytest
from psycopg.types.json import Jsonb

DB = "erased_data"
SOURCE = "erase"


def database_dir(conn) -> Path:
    oid = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()[0]
    return Path(os.environ["WEBHOOK_DEDUP_PGDATA"]) / "base" / str(oid)


def files_holding(conn, marker: bytes) -> list:
    """The files of this database that hold `marker`, after a CHECKPOINT
    wrote every dirty page (and removed the files of dropped relations)."""
    conn.execute("CHECKPOINT")
    found = []
    for path in sorted(database_dir(conn).iterdir()):
        if path.is_file() and marker in path.read_bytes():
            found.append(path.name)
    return found


@pytest.fixture(scope="module")
def db(connect):
    if not os.environ.get("WEBHOOK_DEDUP_PGDATA"):
        pytest.fail("WEBHOOK_DEDUP_PGDATA is not set (scripts/test.sh sets it)", pytrace=False)
    with connect() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB}")
        conn.execute(f"CREATE DATABASE {DB}")
    conn = psycopg.connect(dbname=DB, autocommit=True)
    conn.execute("CREATE EXTENSION webhook_dedup")
    conn.execute("INSERT INTO webhook_dedup.sources (source, keep_payload) VALUES (%s, true)", (SOURCE,))
    conn.execute("SELECT * FROM webhook_dedup.run_maintenance()")  # the archive's day partitions
    # (this throwaway database stores results uncompressed, so that a
    # marker in one is found as written)
    conn.execute("ALTER TABLE webhook_dedup.keys ALTER COLUMN result SET STORAGE EXTERNAL")
    yield conn
    conn.close()
    with connect() as other:
        other.execute(f"DROP DATABASE {DB} WITH (FORCE)")


def body_with(marker: bytes, size: int) -> bytes:
    """`size` random bytes with `marker` in the middle: incompressible, so
    a large one is stored out of line in TOAST as it is (neither pglz nor
    LZ4 keeps a compressed copy that saves nothing)."""
    half = (size - len(marker)) // 2
    return os.urandom(half) + marker + os.urandom(size - len(marker) - half)


def test_erased_bytes_stay_until_purged(db):
    conn = db
    marker = b"ERASEME-" + secrets.token_hex(12).encode()
    kept = b"KEEPME-" + secrets.token_hex(12).encode()
    result_marker = "RESULT-" + secrets.token_hex(12)
    # a small body (in the heap) and a large one (in TOAST), each with its
    # headers; then other keys' payloads after them, so that VACUUM cannot
    # simply cut the erased pages off the end of the files
    small = b'{"customer":"' + marker + b'"}'
    large = body_with(marker, 20_000)
    for key, body in (("small", small), ("large", large)):
        assert conn.execute("SELECT webhook_dedup.webhook_enqueue(%s, %s, %s, 'order.paid', %s)",
                            (SOURCE, key, body, Jsonb({"x-customer": marker.decode()}))).fetchone()[0] == "accepted"
    token = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim(%s, 'done', 'x'::bytea)",
                         (SOURCE,)).fetchone()[0]
    # a result large enough for TOAST (a small one's old version is often
    # overwritten when VACUUM compacts its page; the TOAST pages it leaves
    # empty are not)
    receipt = secrets.token_hex(6_000)
    assert conn.execute("SELECT webhook_dedup.webhook_complete(%s, 'done', %s, %s)",
                        (SOURCE, token, Jsonb({"receipt_for": result_marker, "receipt": receipt}))).fetchone()[0]
    for key, body in (("other-small", b"{\"x\":\"" + kept + b"\"}"), ("other-large", body_with(kept, 20_000))):
        conn.execute("SELECT webhook_dedup.webhook_enqueue(%s, %s, %s)", (SOURCE, key, body))
    token = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim(%s, 'other-done')", (SOURCE,)).fetchone()[0]
    conn.execute("SELECT webhook_dedup.webhook_complete(%s, 'other-done', %s, %s)",
                 (SOURCE, token, Jsonb({"receipt": secrets.token_hex(6_000)})))
    assert files_holding(conn, marker), "the scan finds what was written (else it proves nothing below)"
    assert files_holding(conn, result_marker.encode())

    erased = sum(conn.execute("SELECT keys FROM webhook_dedup.redact(%s, idem_key => %s)", (SOURCE, key)).fetchone()[0]
                 for key in ("small", "large", "done"))
    assert erased == 3
    for _ in range(2):
        conn.execute("VACUUM webhook_dedup.payloads, webhook_dedup.keys")
        for (part,) in conn.execute("SELECT inhrelid::regclass::text FROM pg_inherits"
                                    " WHERE inhparent = 'webhook_dedup.archive'::regclass").fetchall():
            conn.execute(f"VACUUM {part}")
    # what 0.3.0's documents said was gone is still in the data files
    assert files_holding(conn, marker), "VACUUM frees the space without wiping it"
    assert files_holding(conn, result_marker.encode())
    pending = conn.execute("SELECT count(*), bool_and(purged_at IS NULL),"
                           "       bool_and('webhook_dedup.keys' = ANY (relations))"
                           "  FROM webhook_dedup.redactions WHERE source = %s", (SOURCE,)).fetchone()
    assert pending == (3, True, True)

    rewritten = {r[0] for r in conn.execute("SELECT relation FROM webhook_dedup.purge_redactions()").fetchall()}
    assert "webhook_dedup.payloads" in rewritten and "webhook_dedup.keys" not in rewritten
    assert any(r.startswith("webhook_dedup.archive_") for r in rewritten), rewritten
    assert files_holding(conn, marker) == []
    # the keys' erased results are rewritten only when asked (it locks
    # every claim out for the rewrite)
    assert files_holding(conn, result_marker.encode())
    rewritten = {r[0] for r in conn.execute(
        "SELECT relation FROM webhook_dedup.purge_redactions(include_keys => true)").fetchall()}
    assert rewritten == {"webhook_dedup.keys"}
    assert files_holding(conn, result_marker.encode()) == []
    assert conn.execute("SELECT bool_and(purged_at IS NOT NULL AND keys_purged) FROM webhook_dedup.redactions"
                        " WHERE source = %s", (SOURCE,)).fetchone()[0]
    assert conn.execute("SELECT count(*) FROM webhook_dedup.purge_redactions(include_keys => true)").fetchone()[0] == 0

    # what was not erased is intact, and still in the files
    assert files_holding(conn, kept)
    payloads = dict(conn.execute("SELECT idem_key, payload FROM webhook_dedup.payloads WHERE source = %s"
                                 " ORDER BY 1", (SOURCE,)).fetchall())
    assert set(payloads) == {"other-small", "other-large"} and kept in payloads["other-large"]
    taken = conn.execute("SELECT idem_key FROM webhook_dedup.webhook_next(%s, batch => 10)", (SOURCE,)).fetchall()
    assert {k for (k,) in taken} == {"other-small", "other-large"}
    # the erased keys are tombstones still answering their duplicates
    assert conn.execute("SELECT outcome FROM webhook_dedup.webhook_claim(%s, 'done', 'x'::bytea)",
                        (SOURCE,)).fetchone()[0] == "duplicate"


def test_a_snapshot_from_before_the_redaction_blocks_the_purge(db):
    """A transaction that could still read the erased rows (its snapshot
    is older than the redaction) would have CLUSTER copy them into the new
    file: the purge refuses (55000, naming the session) until it ends, and
    in the redaction's own transaction."""
    conn = db
    marker = b"OLDSNAP-" + secrets.token_hex(12).encode()
    conn.execute("SELECT webhook_dedup.webhook_enqueue(%s, 'snap', %s)", (SOURCE, b"x" + marker))
    with psycopg.connect(dbname=DB, autocommit=True) as reader:
        reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        assert reader.execute("SELECT count(*) FROM webhook_dedup.payloads WHERE idem_key = 'snap'").fetchone()[0] == 1
        conn.execute("SELECT * FROM webhook_dedup.redact(%s, idem_key => 'snap')", (SOURCE,))
        pid = reader.info.backend_pid
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match=f"pid {pid}"):
            conn.execute("SELECT * FROM webhook_dedup.purge_redactions()")
        # the old snapshot still reads the erased row: copying it is what the refusal prevents
        assert reader.execute("SELECT count(*) FROM webhook_dedup.payloads WHERE idem_key = 'snap'").fetchone()[0] == 1
        reader.execute("COMMIT")
    assert conn.execute("SELECT count(*) FROM webhook_dedup.purge_redactions()").fetchone()[0] >= 1
    assert files_holding(conn, marker) == []
    with conn.transaction():
        conn.execute("SELECT webhook_dedup.webhook_enqueue(%s, 'same-xact', 'y'::bytea)", (SOURCE,))
        conn.execute("SELECT * FROM webhook_dedup.redact(%s, idem_key => 'same-xact')", (SOURCE,))
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="not committed"):
            with conn.transaction():
                conn.execute("SELECT * FROM webhook_dedup.purge_redactions()")
