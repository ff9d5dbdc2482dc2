"""What the PostgreSQL build under test was compiled with.

The test command runs the cluster layer on Debian's PostgreSQL 15 and on
the PyPI builds of other majors (scripts/lib.sh, pg_wheel). Those builds
leave out optional parts: pgserver 0.1.4 (PostgreSQL 16.2) has no ICU and
no contrib modules (amcheck among them). A test that needs such a part
calls `require` first: on a build without it the test is skipped, with
the part named (pytest -rs lists it); where the part must be there
(WEBHOOK_DEDUP_FULL_BUILD=1, set by scripts/test.sh for Debian's build)
its absence fails the test instead, so nothing is skipped there unseen.
"""

import os

import pytest

PROBES = {
    # initdb imports the ICU locales as collations (und-x-icu, ...) when
    # built with ICU; the catalog's own "unicode" (provider i, since 16) is
    # there either way
    "icu": "SELECT EXISTS (SELECT FROM pg_catalog.pg_collation WHERE collprovider = 'i' AND collname LIKE '%-x-icu')",
    "amcheck": "SELECT EXISTS (SELECT FROM pg_catalog.pg_available_extensions WHERE name = 'amcheck')",
    # a contrib module without an extension: its library in $libdir
    "auto_explain": "SELECT (pg_catalog.pg_stat_file((SELECT c.setting FROM pg_catalog.pg_config AS c"
                    " WHERE c.name = 'PKGLIBDIR') || '/auto_explain.so', true)).size IS NOT NULL",
}


def require(conn, part: str):
    """Skip (or, under WEBHOOK_DEDUP_FULL_BUILD=1, fail) unless the server
    `conn` is connected to has `part` (a key of PROBES)."""
    if conn.execute(PROBES[part]).fetchone()[0]:
        return
    version = conn.execute("SHOW server_version").fetchone()[0]
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
    message = f"{test}: PostgreSQL {version} as built here has no {part}"
    if os.environ.get("WEBHOOK_DEDUP_FULL_BUILD") == "1":
        pytest.fail(message + " (WEBHOOK_DEDUP_FULL_BUILD=1: this build must have it)", pytrace=False)
    pytest.skip(message)
