"""Every monitoring query the documents give runs for the roles the
documents give it to.

docs/operations.md's monitoring queries read webhook_dedup.keys for the
expired leases and the queue backlog, which failed with 42501 for
webhook_dedup_reader and webhook_dedup_operator, the roles docs/metrics.md
says need no table access (only the extension's owner reads the keys).
Those queries now read the views lapsed_leases and queue_backlog. This test
takes every SQL statement of the "Monitoring" section of docs/operations.md
and every runnable query of docs/metrics.md straight from the files, and
runs each as a login holding webhook_dedup_reader, one holding
webhook_dedup_operator and one holding pg_monitor (each in a transaction
rolled back): none may fail. A statement added to those sections is tested
without a change here.
"""

import re
from pathlib import Path

import psycopg
import pytest

from own_cluster import wait_for

DOCS = Path(__file__).resolve().parents[2] / "docs"
LOGINS = {"q_reader": "webhook_dedup_reader", "q_operator": "webhook_dedup_operator", "q_monitor": "pg_monitor"}


def sql_blocks(text: str) -> list[str]:
    return re.findall(r"```sql\n(.*?)```", text, re.S)


def statements(block: str) -> list[str]:
    """The statements of a block: `--` comments dropped, split at `;`."""
    code = "\n".join(line for line in block.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in code.split(";") if s.strip()]


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    following = text.find("\n## ", start + len(heading))
    return text[start:following if following >= 0 else len(text)]


def documented_queries() -> list[tuple[str, str]]:
    operations = (DOCS / "operations.md").read_text()
    metrics = (DOCS / "metrics.md").read_text()
    found = [("operations.md, Monitoring", s) for b in sql_blocks(section(operations, "## Monitoring"))
             for s in statements(b)]
    # metrics.md: every block of queries (the function signatures are not)
    found += [("metrics.md", s) for b in sql_blocks(metrics) for s in statements(b)
              if re.match(r"(?i)select\b", s)]
    return found


QUERIES = documented_queries()


def test_the_documents_have_the_queries():
    """The extraction found them (a renamed heading would test nothing)."""
    where = {w for w, _ in QUERIES}
    assert where == {"operations.md, Monitoring", "metrics.md"}, where
    assert len(QUERIES) >= 20, QUERIES
    assert any("lapsed_leases" in q for _, q in QUERIES) and any("queue_backlog" in q for _, q in QUERIES)
    assert not [q for _, q in QUERIES if re.search(r"webhook_dedup\.keys\b", q)], \
        "a monitoring query reads the key table, which only the extension's owner may"


@pytest.fixture(scope="module")
def logins(connect):
    with connect() as conn:
        for login, role in LOGINS.items():
            conn.execute(f"DROP ROLE IF EXISTS {login}")
            conn.execute(f"CREATE ROLE {login} LOGIN IN ROLE {role}")
        # something in every view: a key in each state the queries look at
        conn.execute("SELECT webhook_dedup.webhook_claim('docs-q', 'lapsed', lease => '1 millisecond')")
        conn.execute("SELECT webhook_dedup.webhook_enqueue('docs-q', 'queued', 'p'::bytea)")
        # a pass sweeps the expired lease (the worker's, or one run here)
        wait_for("the expired lease swept", lambda: conn.execute(
            "SELECT ran FROM webhook_dedup.run_maintenance()").fetchone() and conn.execute(
            "SELECT state = 'failed' FROM webhook_dedup.keys WHERE source = 'docs-q' AND idem_key = 'lapsed'"
        ).fetchone()[0], 15)
    yield list(LOGINS)
    with connect() as conn:
        conn.execute("DELETE FROM webhook_dedup.keys WHERE source = 'docs-q'")
        for login in LOGINS:
            conn.execute(f"DROP ROLE {login}")


@pytest.mark.parametrize("login", list(LOGINS))
def test_every_documented_monitoring_query_runs_for_the_roles(logins, login):
    failed = []
    with psycopg.connect(user=login) as conn:
        for where, query in QUERIES:
            try:
                conn.execute(query).fetchall()
            except psycopg.Error as e:
                failed.append(f"{where}: {query!r}: {e.sqlstate} {e}")
            conn.rollback()
    assert not failed, "\n".join(failed)


def test_the_new_views_show_the_keys(connect, logins):
    with psycopg.connect(user="q_reader", autocommit=True) as conn:
        lapsed = conn.execute("SELECT idem_key, attempt FROM webhook_dedup.lapsed_leases WHERE source = 'docs-q'"
                              ).fetchall()
        assert lapsed == [("lapsed", 1)]
        backlog = conn.execute("SELECT due_keys FROM webhook_dedup.queue_backlog WHERE source = 'docs-q'").fetchall()
        assert backlog == [(2,)], "the lapsed key (due again) and the queued one"
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT count(*) FROM webhook_dedup.keys")
