"""The SQL edition installed with psql -f, where there is no pg_tle
(issue 43, item 5: Google Cloud SQL and AlloyDB, Azure, Neon): the
artifact (WEBHOOK_DEDUP_SQL_EDITION_PSQL, webhook_dedup-sql--<version>.sql)
run in a new database of the SQL edition's server makes the same catalogs
as the extension does (the queries of test_schema.py), is idempotent, refuses
over an extension and changes nothing then, and the API works as a login with
the receiver role. Without pgcrypto it works but for HMAC-SHA1, which it
refuses with 0A000 until pgcrypto is created.
"""

import os
import subprocess

import psycopg
import pytest

from editions import SHA1_WITHOUT_PGCRYPTO, answer, require, sql_edition_has_pgcrypto
from test_schema import CATALOG

DB = "plain_install"


def psql_file(edition, path, dbname):
    return subprocess.run([str(edition.bin / "psql"), "-X", "-q", "-h", str(edition.dir), "-U", "postgres",
                           "-d", dbname, "-f", path], capture_output=True, text=True)


@pytest.fixture(scope="module")
def plain(sql):
    require(("WEBHOOK_DEDUP_SQL_EDITION_PSQL",))
    with sql.connect() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB}")
        conn.execute(f"CREATE DATABASE {DB}")
    # no pgcrypto: neither artifact needs it (only the HMAC-SHA1 schemes do, when called)
    done = psql_file(sql, os.environ["WEBHOOK_DEDUP_SQL_EDITION_PSQL"], DB)
    assert done.returncode == 0, done.stderr[-3000:]
    yield sql
    with sql.connect() as conn:
        conn.execute(f"DROP DATABASE {DB}")


def test_the_catalogs_are_the_extensions(sql, plain):
    differ = []
    for what, query in CATALOG.items():
        if what.startswith("the extension "):
            continue  # a psql -f install is no extension: there is no pg_extension row
        with sql.connect() as a, sql.connect(dbname=DB) as b:
            x, y = a.execute(query).fetchall(), b.execute(query).fetchall()
        assert x, f"{what}: the extension shows nothing (the query is wrong)"
        if x != y:
            differ.append(f"{what}:\n  extension only: {[r for r in x if r not in y][:5]}\n"
                          f"  psql -f only: {[r for r in y if r not in x][:5]}")
    assert not differ, "\n".join(differ)
    version = os.path.basename(os.environ["WEBHOOK_DEDUP_SQL_EDITION_PSQL"]).removeprefix("webhook_dedup-sql--")
    with sql.connect(dbname=DB) as conn:
        assert conn.execute("SELECT webhook_dedup._sql_edition_version()").fetchone()[0] == version.removesuffix(".sql")


def test_running_it_again_does_nothing(sql, plain):
    with sql.connect(dbname=DB) as conn:
        conn.execute("SELECT webhook_dedup.webhook_claim('again', 'again:1')")
    done = psql_file(sql, os.environ["WEBHOOK_DEDUP_SQL_EDITION_PSQL"], DB)
    assert done.returncode == 0 and "is installed in this database already: nothing to do" in done.stdout, done
    with sql.connect(dbname=DB) as conn:
        assert conn.execute("SELECT count(*) FROM webhook_dedup.keys WHERE source = 'again'").fetchone()[0] == 1


def test_it_refuses_over_the_extension_and_changes_nothing(sql):
    # the tle install of database postgres
    with sql.connect() as conn:
        before = conn.execute("SELECT count(*) FROM pg_proc WHERE pronamespace = 'webhook_dedup'::regnamespace").fetchone()
    done = psql_file(sql, os.environ["WEBHOOK_DEDUP_SQL_EDITION_PSQL"], "postgres")
    assert done.returncode == 3 and "installed in this database as an extension" in done.stderr, done
    with sql.connect() as conn:
        after = conn.execute("SELECT count(*) FROM pg_proc WHERE pronamespace = 'webhook_dedup'::regnamespace").fetchone()
        assert before == after
        assert conn.execute("SELECT to_regprocedure('webhook_dedup._sql_edition_version()')").fetchone()[0] is None


def test_a_receiver_login_works_through_the_api(sql, plain):
    with sql.connect(dbname=DB) as conn:
        conn.execute("DROP ROLE IF EXISTS plain_receiver")
        conn.execute("CREATE ROLE plain_receiver LOGIN IN ROLE webhook_dedup_receiver")
    try:
        with psycopg.connect(host=str(sql.dir), port=5432, user="plain_receiver", dbname=DB, autocommit=True) as conn:
            body = b'{"n": 1}'
            got = answer(conn, "SELECT r.outcome, r.http_status FROM webhook_dedup.webhook_receive('github', %s,"
                         " webhook_dedup.webhook_sign('github', %s, 's') || '{\"X-GitHub-Delivery\": \"p1\"}',"
                         " ARRAY['s'], wait => '0') AS r", (body, body))
            assert got == ("rows", [("claimed", 200)]), got
            assert answer(conn, "SELECT count(*) FROM webhook_dedup.keys")[:2] == ("error", "42501")
    finally:
        with sql.connect(dbname=DB) as conn:
            conn.execute("DROP OWNED BY plain_receiver")
            conn.execute("DROP ROLE plain_receiver")


def test_without_pgcrypto_only_hmac_sha1_is_refused(native, sql, plain):
    calls = [("SELECT webhook_dedup.webhook_hmac('body', 'k', %s)", (algorithm,)) for algorithm in ("sha1", "sha256")]
    calls.append(("SELECT * FROM webhook_dedup.webhook_verify_detail('intercom', 'body', %s::jsonb, ARRAY['k'])",
                  ('{"X-Hub-Signature": "sha1=0000000000000000000000000000000000000000"}',)))
    with native.connect() as a, sql.connect(dbname=DB) as b:
        (sha1, sha256, intercom) = [(answer(a, *c), answer(b, *c)) for c in calls]
        assert sha1[1] == SHA1_WITHOUT_PGCRYPTO and intercom[1] == SHA1_WITHOUT_PGCRYPTO, (sha1, intercom)
        assert sha256[0] == sha256[1] and sha256[0][0] == "rows", sha256
        if not sql_edition_has_pgcrypto():
            pytest.skip("no pgcrypto in this PostgreSQL build: HMAC-SHA1 stays refused (docs/sql-edition.md)")
        b.execute("CREATE EXTENSION pgcrypto")
        try:
            assert [answer(b, *c) for c in calls] == [answer(a, *c) for c in calls]
        finally:
            b.execute("DROP EXTENSION pgcrypto")
