"""ALTER EXTENSION webhook_dedup UPDATE from 0.1.0, the version built from
commit 9f23a3f (the last with time partitions), to the current one, on a
cluster of its own:

1. 0.1.0 is built from that commit (git archive) and installed, a cluster
   starts with it preloaded, and its API fills a database with keys in every
   state (completed with a result, leased, with an expired lease, failed,
   dead-lettered, unknown, pending with a payload and headers, checkpointed,
   conflicting), keys in a partition of 2020 and in the default partition,
   per-source settings, watermarks, flushed counts and maintenance runs;
2. the cluster stops, the current version is installed, the cluster starts,
   and `ALTER EXTENSION webhook_dedup UPDATE` runs;
3. every key is still there with every column it had (a completed key's
   token aside, which 0.2.0 clears), each answers a delivery as it did
   before, the queue hands out the pending payload, history and settings
   are intact, maintenance runs; privileges granted on the objects the
   update rebuilds (the key table, a view over it, a receiver function
   whose EXECUTE was restricted, run_maintenance) are kept, and the key
   table's also given on the new payloads table; and the updated schema is
   the schema of a fresh install with the same grants, object for object
   (members, columns, indexes, constraints, views, functions, comments,
   triggers, privileges).

Run by scripts/test.sh as its own layer, after the shared cluster stopped:
it installs other builds of the library, which a running server must not
have mapped. Whatever happens, the current build is installed again at the
end, and 0.1.0's install script removed.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "cluster"))
from own_cluster import OwnCluster  # noqa: E402

OLD_VERSION = "0.1.0"
OLD_COMMIT = "9f23a3f"


def pg_config() -> str:
    return str(Path(os.environ["WEBHOOK_DEDUP_PG_BIN"]) / "pg_config")


def sharedir() -> Path:
    out = subprocess.run([pg_config(), "--sharedir"], check=True, capture_output=True, text=True).stdout.strip()
    return Path(out) / "extension"


def run(cmd, cwd=None, env=None):
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}", pytrace=False)
    return done.stdout


def install_old(workdir: Path, version: str = OLD_VERSION, commit: str = OLD_COMMIT):
    """Build an old version from its commit and install it (a debug build:
    only the data migration is under test), in a target directory of its
    own (target/upgrade-<version>, kept between runs)."""
    if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"]).returncode != 0:
        pytest.fail(f"commit {commit} is not in this clone's history (a shallow clone?)", pytrace=False)
    src = workdir / f"v{version}"
    src.mkdir()
    archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", commit], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(src)], stdin=archive.stdout, check=True)
    assert archive.wait() == 0
    lib = Path(run([pg_config(), "--pkglibdir"]).strip()) / "webhook_dedup.so"
    lib.unlink(missing_ok=True)
    env = dict(os.environ, CARGO_TARGET_DIR=str(ROOT / "target" / f"upgrade-{version}"))
    run(["cargo", "pgrx", "install", "--pg-config", pg_config(), "--no-default-features", "--features", "pg15"],
        cwd=src, env=env)
    assert (sharedir() / f"webhook_dedup--{version}.sql").exists()


def install_current():
    """The test command's own build (scripts/lib.sh install_extension)."""
    run(["bash", "-c", f"source '{ROOT}/scripts/lib.sh' && install_extension"])


ROLES = ("upgrade_receiver", "upgrade_analyst", "upgrade_cron")


def grant(conn, claim_signature: str, functions: bool = True):
    """What a DBA grants: a receiver role on the keys and webhook_claim
    (EXECUTE revoked from PUBLIC), an analyst on a view over keys, a
    pg_cron role on run_maintenance()."""
    for statement in (
        "GRANT USAGE ON SCHEMA webhook_dedup TO upgrade_receiver, upgrade_analyst, upgrade_cron",
        "GRANT SELECT, INSERT, UPDATE, DELETE ON webhook_dedup.keys TO upgrade_receiver",
        "GRANT SELECT ON webhook_dedup.sources TO upgrade_receiver",
        "GRANT SELECT ON webhook_dedup.key_states TO upgrade_analyst WITH GRANT OPTION",
        f"REVOKE EXECUTE ON FUNCTION {claim_signature} FROM PUBLIC",
        f"GRANT EXECUTE ON FUNCTION {claim_signature} TO upgrade_receiver",
        "GRANT EXECUTE ON FUNCTION webhook_dedup.run_maintenance() TO upgrade_cron",
    ):
        if functions or "FUNCTION" not in statement:
            conn.execute(statement)


def fill(conn):
    """Keys in every state through 0.1.0's API, and history around them."""
    q = conn.execute
    q("INSERT INTO webhook_dedup.sources (source, retention, lease) VALUES ('long', '90 days', '2 minutes')")
    # completed, with a result
    for key in ("done1", "done2"):
        token = q("SELECT claim_token FROM webhook_claim('s', %s, 'body'::bytea)", (key,)).fetchone()[0]
        q("SELECT webhook_complete('s', %s, %s, '{\"status\": 200, \"n\": 12345678901234567890}')", (key, token))
    token = q("SELECT claim_token FROM webhook_claim('long', 'kept')").fetchone()[0]
    q("SELECT webhook_complete('long', 'kept', %s)", (token,))
    # leased (live), leased with a checkpoint, leased with an expired lease
    q("SELECT webhook_claim('s', 'live', lease => '1 hour', event_type => 'push')")
    token = q("SELECT claim_token FROM webhook_claim('s', 'stepped', lease => '1 hour')").fetchone()[0]
    q("SELECT webhook_checkpoint('s', 'stepped', %s, 'charged')", (token,))
    q("SELECT webhook_claim('s', 'crashed', lease => '1 millisecond')")
    # failed (due later), dead-lettered, unknown outcome
    token = q("SELECT claim_token FROM webhook_claim('s', 'retry')").fetchone()[0]
    q("SELECT webhook_fail('s', 'retry', %s, 'timeout', retry_after => '1 hour')", (token,))
    token = q("SELECT claim_token FROM webhook_claim('s', 'poison')").fetchone()[0]
    q("SELECT webhook_fail('s', 'poison', %s, 'bad input', retryable => false)", (token,))
    token = q("SELECT claim_token FROM webhook_claim('s', 'unsure')").fetchone()[0]
    q("SELECT webhook_mark_unknown('s', 'unsure', %s, 'gateway timeout')", (token,))
    # pending with a payload and headers; a conflicting delivery of a key
    q("SELECT webhook_enqueue('q', 'queued', 'the payload'::bytea, 'order.paid', '{\"x-id\": \"1\"}')")
    q("SELECT webhook_claim('s', 'done1', 'other body'::bytea)")
    # a key in a partition of 2020 (active since) and one in the default partition
    q("""CREATE TABLE webhook_dedup.keys_p20200301_0000 PARTITION OF webhook_dedup.keys
           FOR VALUES FROM ('2020-03-01 00:00+00') TO ('2020-03-02 00:00+00')""")
    q("CREATE UNIQUE INDEX ON webhook_dedup.keys_p20200301_0000 (idem_key, source)")
    q("""INSERT INTO webhook_dedup.keys (source, idem_key, partition_at, state, attempt, first_seen_at,
                                         last_seen_at, completed_at, result)
         VALUES ('s', 'old', '2020-03-01 12:00+00', 'completed', 1, '2020-03-01 12:00+00', now(),
                 '2020-03-01 12:00+00', '{"old": true}'),
                ('s', 'stray', '1999-01-01', 'dead_lettered', 3, '1999-01-01', '1999-01-01', NULL, NULL)""")
    assert q("SELECT count(*) FROM webhook_dedup.keys_default").fetchone()[0] == 1
    # history: watermarks, flushed counts, maintenance runs
    q("SELECT webhook_advance('s', 'sub_1', '2026-01-01 00:00+00', 'evt_1')")
    q("SELECT * FROM webhook_dedup.run_maintenance()")
    q("SELECT * FROM webhook_dedup.run_maintenance()")


KEY_COLUMNS = ("source, idem_key, state, attempt, claim_token, lease_expires_at, next_attempt_at, due_at, "
               "fingerprint, event_type, result::text, last_step, last_error, deliveries, conflicts, first_seen_at, "
               "last_seen_at, completed_at, leased_at")


def keys(conn):
    return {(r[0], r[1]): r for r in conn.execute(
        f"SELECT {KEY_COLUMNS} FROM webhook_dedup.keys ORDER BY source, idem_key").fetchall()}


HISTORY = {
    "sources": "SELECT * FROM webhook_dedup.sources ORDER BY source",
    "watermarks": "SELECT * FROM webhook_dedup.watermarks ORDER BY source, entity_id",
    "conflicts": "SELECT id, source, idem_key, seen_at, stored_fingerprint, fingerprint, via"
                 "  FROM webhook_dedup.conflict_log ORDER BY id",
    "counts": "SELECT * FROM webhook_dedup.claim_counts ORDER BY source, bucket, event_type, bucket_width",
    "runs": "SELECT id, started_at, leases_expired, dead_lettered, keys_pruned, history_pruned, metrics_flushed,"
            "       retention_warnings, more, errors FROM webhook_dedup.maintenance_runs ORDER BY id",
}


# The schema of the extension, object by object, comparable across databases.
SCHEMA = {
    "dumped": """
        SELECT x.c::regclass::text, x.cond
          FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS x(c, cond)
         WHERE e.extname = 'webhook_dedup' ORDER BY 1""",
    # (the update's stubs in public, which a fresh install has not, apart:
    # test_moved_functions_leave_stubs)
    "members": """
        SELECT pg_describe_object(d.classid, d.objid, d.objsubid)
          FROM pg_depend d JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
         WHERE e.extname = 'webhook_dedup' AND d.deptype = 'e'
           AND NOT (d.classid = 'pg_proc'::regclass
                    AND d.objid IN (SELECT oid FROM pg_proc WHERE pronamespace = 'public'::regnamespace))
         ORDER BY 1""",
    "columns": """
        SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               pg_get_expr(ad.adbin, ad.adrelid), co.collname, a.attidentity, col_description(c.oid, a.attnum)
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
          LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
          LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 100
         WHERE n.nspname = 'webhook_dedup' ORDER BY 1, 2""",
    "relations": """
        SELECT c.relname, c.relkind, c.reloptions::text, obj_description(c.oid, 'pg_class'),
               -- a NULL ACL is the default one (an update that revokes what
               -- default privileges gave leaves the default written out)
               (SELECT array_agg(x::text ORDER BY x::text)
                  FROM unnest(coalesce(c.relacl, acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char",
                                                            c.relowner))) x)
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'webhook_dedup' AND c.relkind <> 'S' ORDER BY 1""",
    "indexes": """
        SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'webhook_dedup' ORDER BY 1""",
    "constraints": """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
         WHERE connamespace = 'webhook_dedup'::regnamespace ORDER BY 1, 2""",
    "views": """
        SELECT c.relname, pg_get_viewdef(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'webhook_dedup' AND c.relkind = 'v' ORDER BY 1""",
    "functions": """
        SELECT p.oid::regprocedure::text, pg_get_function_result(p.oid), pg_get_function_arguments(p.oid),
               p.prosrc, p.provolatile, p.proisstrict, p.proparallel, p.proconfig::text,
               obj_description(p.oid, 'pg_proc'),
               (SELECT array_agg(x::text ORDER BY x::text) FROM unnest(coalesce(p.proacl, acldefault('f', p.proowner))) x)
          FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
          JOIN pg_extension e ON d.refobjid = e.oid AND e.extname = 'webhook_dedup'
         WHERE p.pronamespace <> 'public'::regnamespace ORDER BY 1""",
    "types": """
        SELECT t.typname, obj_description(t.oid, 'pg_type') FROM pg_type t
         WHERE t.typnamespace = 'webhook_dedup'::regnamespace AND t.typtype = 'c'
           AND t.typrelid IN (SELECT oid FROM pg_class WHERE relkind = 'c') ORDER BY 1""",
    "triggers": """
        SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid) FROM pg_trigger
         WHERE NOT tgisinternal AND tgrelid IN (SELECT oid FROM pg_class
                                                 WHERE relnamespace = 'webhook_dedup'::regnamespace) ORDER BY 1, 2""",
}


# The payload archive's day partitions (and their indexes) are made by the
# maintenance worker at run time, for the days around now, whichever way the
# extension was installed: not part of the schema compared.
DAY_PARTITION = re.compile(r"\barchive_\d{8}")


def of_a_day_partition(row) -> bool:
    return any(isinstance(v, str) and DAY_PARTITION.search(v) for v in row)


def assert_same_schema(cluster, updated: str, fresh: str) -> None:
    """The extension's objects in database `updated` are those of `fresh`,
    object for object (SCHEMA)."""
    described = {}
    for db in (updated, fresh):
        with psycopg.connect(host=str(cluster.dir), port=5432, user="postgres", dbname=db) as conn:
            described[db] = {name: [r for r in conn.execute(sql).fetchall() if not of_a_day_partition(r)]
                             for name, sql in SCHEMA.items()}
    for name in SCHEMA:
        assert described[updated][name] == described[fresh][name], name


@pytest.fixture(scope="module")
def upgraded():
    """The cluster after the update, with what 0.1.0 held before it."""
    workdir = Path(tempfile.mkdtemp(prefix="webhook_dedup_upgrade."))
    cluster = None
    try:
        install_old(workdir)
        cluster = OwnCluster({})
        with cluster.connect() as conn:
            conn.execute("CREATE DATABASE old")
        with cluster.connect() as conn:
            for role in ROLES:
                conn.execute(f"CREATE ROLE {role} NOLOGIN")
        with cluster.connect("old") as conn:
            conn.execute("CREATE EXTENSION webhook_dedup")
            assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'webhook_dedup'"
                                ).fetchone()[0] == OLD_VERSION
            fill(conn)
            grant(conn, "webhook_claim(text, text, bytea, interval, text)")  # 0.1.0: in public
            before = keys(conn)
            payloads = conn.execute("SELECT source, idem_key, payload, headers::text FROM webhook_dedup.keys"
                                    " WHERE payload IS NOT NULL ORDER BY 1, 2").fetchall()
            history = {name: conn.execute(sql).fetchall() for name, sql in HISTORY.items()}
        cluster.stop()
        install_current()
        cluster.start()
        with cluster.connect("old") as conn:
            conn.execute("ALTER EXTENSION webhook_dedup UPDATE")
        yield cluster, before, payloads, history
    finally:
        if cluster:
            cluster.destroy()
        (sharedir() / f"webhook_dedup--{OLD_VERSION}.sql").unlink(missing_ok=True)
        install_current()
        shutil.rmtree(workdir, ignore_errors=True)


def test_every_key_keeps_every_column(upgraded):
    cluster, before, payloads, history = upgraded
    with cluster.connect("old") as conn:
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'webhook_dedup'").fetchone()[0]
        assert version != OLD_VERSION
        after = keys(conn)
        assert after.keys() == before.keys()
        for key, old in before.items():
            new = after[key]
            if old[2] == "completed":  # the token of a completed key fences nothing: cleared
                assert new[4] is None, key
                old, new = old[:4] + old[5:], new[:4] + new[5:]
            assert new == old, key
        moved = conn.execute("SELECT source, idem_key, payload, headers::text FROM webhook_dedup.payloads"
                             " ORDER BY 1, 2").fetchall()
        assert moved == payloads and len(moved) == 1
        for name, sql in HISTORY.items():
            old = history[name]
            now = conn.execute(sql).fetchall()[:len(old)]
            # 0.2.0 appends columns (sources: the intake settings; counts:
            # ignored, replayed): the old ones keep their values
            assert [row[:len(old[0])] for row in now] == old, name
        expiry = dict(conn.execute(
            "SELECT idem_key, expires_at - last_seen_at FROM webhook_dedup.keys WHERE state = 'completed'").fetchall())
        assert expiry["done1"].days == 30 and expiry["kept"].days == 90, "kept for the source's retention"
        assert conn.execute("SELECT count(*) FROM webhook_dedup.keys WHERE state <> 'completed'"
                            " AND expires_at IS NOT NULL").fetchone()[0] == 0


def test_every_key_answers_as_before(upgraded):
    cluster, *_ = upgraded
    with cluster.connect("old") as conn:
        def claim(source, key, payload=None):
            return conn.execute("SELECT outcome, attempt, result::text, last_step FROM webhook_dedup.webhook_claim(%s, %s, %s)",
                                (source, key, payload)).fetchone()

        assert claim("s", "done1", b"body") == ("duplicate", 1, '{"n": 12345678901234567890, "status": 200}', None)
        assert claim("s", "done1", b"other body")[0] == "conflict"
        assert claim("s", "old")[:3] == ("duplicate", 1, '{"old": true}')
        assert claim("long", "kept")[0] == "duplicate"
        assert claim("s", "live")[0] == "in_progress"
        assert claim("s", "stepped")[0] == "in_progress"
        assert claim("s", "crashed")[:2] == ("reclaimed", 2)
        assert claim("s", "retry")[0] == "retry_later"
        assert claim("s", "poison")[0] == "dead_lettered"
        assert claim("s", "stray")[0] == "dead_lettered"
        assert claim("s", "unsure")[0] == "unknown_outcome"
        assert claim("s", "new")[0] == "claimed"
        # the live lease's token still completes it
        token = conn.execute("SELECT claim_token FROM webhook_dedup.keys WHERE idem_key = 'live'").fetchone()[0]
        assert conn.execute("SELECT webhook_dedup.webhook_complete('s', 'live', %s)", (token,)).fetchone()[0] is True
        # the queue hands out the stored payload and headers
        taken = conn.execute("SELECT idem_key, attempt, payload, headers->>'x-id', event_type"
                             "  FROM webhook_dedup.webhook_next('q', batch => 5)").fetchall()
        assert taken == [("queued", 1, b"the payload", "1", "order.paid")]
        assert conn.execute("SELECT count(*) FROM webhook_dedup.conflicts WHERE idem_key = 'done1'"
                            ).fetchone()[0] == 2
        assert conn.execute("SELECT webhook_dedup.webhook_advance('s', 'sub_1', '2025-01-01 00:00+00')").fetchone()[0] is False
        ran, errors = conn.execute("SELECT ran, errors FROM webhook_dedup.run_maintenance()").fetchone()
        assert ran and errors == []


def test_grants_on_rebuilt_objects_are_kept(upgraded):
    cluster, *_ = upgraded
    claim = "webhook_dedup.webhook_claim(text, text, bytea, interval, text)"
    with cluster.connect("old") as conn:
        def has(sql, *args):
            return conn.execute(f"SELECT {sql}", args).fetchone()[0]

        for table in ("webhook_dedup.keys", "webhook_dedup.payloads"):
            assert has("has_table_privilege('upgrade_receiver', %s, 'SELECT, INSERT, UPDATE, DELETE')", table), table
            assert not has("has_table_privilege('upgrade_analyst', %s, 'SELECT')", table), table
        assert has("has_table_privilege('upgrade_analyst', 'webhook_dedup.key_states', 'SELECT WITH GRANT OPTION')")
        assert has("has_function_privilege('upgrade_receiver', %s, 'EXECUTE')", claim)
        assert not has("has_function_privilege('upgrade_analyst', %s, 'EXECUTE')", claim), "EXECUTE stays revoked"
        # 0.1.0's functions ran with their caller's rights: EXECUTE alone (the
        # cron role's) changed nothing, and is not carried over to 0.2.0's,
        # which run as their owner; maintenance is webhook_dedup_operator's
        assert not has("has_function_privilege('upgrade_cron', 'webhook_dedup.run_maintenance()', 'EXECUTE')")
        assert not has("has_function_privilege('upgrade_analyst', 'webhook_dedup.run_maintenance()', 'EXECUTE')")
        receive = ("webhook_dedup.webhook_receive(text, bytea, jsonb, text[], text, text, text, text, text, interval, boolean, "
                   "interval, timestamptz, text, text, text, text, text, text, interval)")
        # 0.2.0 takes EXECUTE on the functions that change state from PUBLIC
        # (docs/security.md), and makes the roles that could write keys
        # members of the roles for that job, so they keep working
        assert not has("has_function_privilege('upgrade_analyst', %s, 'EXECUTE')", receive)
        assert has("has_function_privilege('upgrade_receiver', %s, 'EXECUTE')", receive)
        assert has("pg_has_role('upgrade_receiver', 'webhook_dedup_receiver', 'MEMBER')")
        assert has("pg_has_role('upgrade_receiver', 'webhook_dedup_operator', 'MEMBER')"), "it could delete keys"
        assert not has("pg_has_role('upgrade_analyst', 'webhook_dedup_receiver', 'MEMBER')")
        assert not has("pg_has_role('upgrade_cron', 'webhook_dedup_receiver', 'MEMBER')")
        # and the receiver role claims through the rebuilt objects
        conn.execute("SET ROLE upgrade_receiver")
        try:
            assert conn.execute(f"SELECT outcome FROM webhook_dedup.webhook_claim('s', 'as-receiver')").fetchone()[0] == "claimed"
        finally:
            conn.execute("RESET ROLE")


def test_moved_functions_leave_stubs(upgraded):
    """The update moves every function from public (0.1.0's schema) into
    webhook_dedup and leaves a stub of each in public, owned by the
    extension: an old receiver's unqualified call gets 42883 naming the new
    place (instead of a function a database owner put there), with named
    arguments and defaults as before; and a function of exactly that
    signature cannot be created there by anyone else."""
    cluster, *_ = upgraded
    with cluster.connect("old") as conn:
        stubs = conn.execute(
            """SELECT p.proname FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass
                 AND d.objid = p.oid AND d.deptype = 'e'
                 JOIN pg_extension e ON d.refobjid = e.oid AND e.extname = 'webhook_dedup'
                WHERE p.pronamespace = 'public'::regnamespace ORDER BY 1""").fetchall()
        moved = conn.execute("SELECT proname FROM pg_proc WHERE pronamespace = 'webhook_dedup'::regnamespace"
                             " AND proname LIKE 'webhook\\_%' ORDER BY 1").fetchall()
        assert stubs and set(stubs) <= set(moved), (stubs, moved)
        assert ("webhook_claim",) in stubs and ("webhook_complete",) in stubs
        with pytest.raises(psycopg.errors.UndefinedFunction,
                           match=r"webhook_claim\(\) moved to schema webhook_dedup in webhook_dedup 0.2.0"):
            conn.execute("SELECT * FROM public.webhook_claim('s', 'k', lease => '1 minute')")
        with pytest.raises(psycopg.errors.DuplicateFunction):
            conn.execute("CREATE FUNCTION public.webhook_claim(source text, idem_key text, payload bytea,"
                         " lease interval, event_type text) RETURNS text LANGUAGE sql AS 'SELECT 1'")


def test_the_updated_schema_is_a_fresh_install(upgraded):
    cluster, *_ = upgraded
    with cluster.connect() as conn:
        conn.execute("CREATE DATABASE fresh")
    with cluster.connect("fresh") as conn:
        conn.execute("CREATE EXTENSION webhook_dedup")
        # the same grants, and on payloads those the update copies from keys
        # (the update carries no function grant over: see above)
        grant(conn, "webhook_dedup.webhook_claim(text, text, bytea, interval, text)", functions=False)
        conn.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON webhook_dedup.payloads TO upgrade_receiver")
    assert_same_schema(cluster, "old", "fresh")
