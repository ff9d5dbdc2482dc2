"""A maintenance pass must not grow with the square of the number of
sources. 0.3.0's webhook_dedup.sources.source was in the database's
collation while every other table's source is in "C", so the per-row
look-up of a source's retention (history_prune.sql, outbox_prune.sql)
could not use the primary key and read every source for every candidate
row: a pass that pruned nothing took 1.45 s at
500 sources and 64.4 s at 4,000, as soon as one source had a shorter
retention than the rest.

With 10,000 sources and work for every step (bench/fill/many_sources.sql),
one run_maintenance() runs under auto_explain (every nested statement with
its actual loops, sent to this session as NOTICEs), and each plan is
checked: webhook_dedup.sources is never read whole more than once by a
statement (a sequential scan looped per row is the quadratic plan); the
per-row look-ups run, and through sources_pkey. Every statement the pass
runs on one server is seen (a statement not reached would be unchecked).
The pass's time at 500, 2,000 and 10,000 sources is a benchmark (make
bench, scenario sources), not asserted here. Needs contrib's auto_explain
(skipped where the server build has none, tests/cluster/server_build.py).
"""

import json
import re
from pathlib import Path

import psycopg
import pytest

from edition import EDITION
from server_build import require

ROOT = Path(__file__).resolve().parents[2]
STATEMENTS = ROOT / "src" / "sql" / "statements"
FILL = ROOT / "bench" / "fill" / "many_sources.sql"
DB = "maintenance_plans"
SOURCES = 10_000

# The statements one pass runs on one server (the *_of_source ones and the
# source lists are the distributed mode's), each reached by the fill.
PASS = [
    "expiry_expired_leases.sql", "expiry_expire_keys.sql", "history_prune.sql",
    "maintenance_runs_prune.sql", "claim_counts_upsert.sql", "outbox_lapsed.sql",
    "outbox_prune.sql", "redrive_running.sql", "redrive_todo.sql", "redrive_lock_key.sql",
    "redrive_payload.sql", "redrive_move.sql", "redrive_outcome.sql", "redrive_progress.sql", "redrive_prune.sql",
    "archive_partitions.sql", "archive_default_days.sql", "archive_longest_retention.sql",
    "archive_sources_to_prune.sql", "archive_prune_source.sql", "maintenance_runs_record.sql",
]


def nodes(plan):
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


@pytest.fixture(scope="module")
def plans(connect):
    with connect() as conn:
        require(conn, "auto_explain")
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")
    with psycopg.connect(dbname=DB, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION webhook_dedup")
        conn.execute(f"SET fill.sources = '{SOURCES}'")
        conn.execute("SET fill.rows = '2000'")
        conn.execute(FILL.read_text())
        seen = []
        conn.add_notice_handler(lambda d: seen.append(d.message_primary or ""))
        conn.execute("LOAD 'auto_explain'")
        for setting, value in (("log_min_duration", "0"), ("log_analyze", "on"), ("log_nested_statements", "on"),
                               ("log_format", "json"), ("log_level", "notice"), ("log_timing", "off")):
            conn.execute(f"SET auto_explain.{setting} = '{value}'")
        ran, errors = conn.execute("SELECT ran, errors FROM webhook_dedup.run_maintenance()").fetchone()
        conn.execute("SET auto_explain.log_min_duration = '-1'")
    with connect() as conn:
        conn.execute(f"DROP DATABASE {DB} WITH (FORCE)")
    assert ran and errors == [], errors
    explained = []
    for message in seen:
        m = re.match(r"duration: [0-9.]+ ms\s+plan:\s*(\{.*)", message, re.S)
        if m:
            explained.append(json.loads(m.group(1)))
    return explained


def statement_of(text: str):
    """The file of src/sql/statements whose text this is, if any."""
    for path in STATEMENTS.glob("*.sql"):
        if path.read_text().strip() == text.strip():
            return path.name
    return None


@pytest.mark.skipif(EDITION == "sql", reason="the SQL edition runs these statements inside its helpers, inlined into"
                    " their callers' plans, where they are not seen by their text (the plans themselves are checked"
                    " below)")
def test_every_statement_of_the_pass_was_explained(plans):
    seen = {statement_of(p["Query Text"]) for p in plans}
    missing = [s for s in PASS if s not in seen]
    assert missing == [], f"not run by the pass (the fill must reach them): {missing}"


def test_no_statement_reads_the_sources_per_row(plans):
    quadratic = []
    looked_up = 0
    for p in plans:
        for node in nodes(p["Plan"]):
            if node.get("Relation Name") != "sources":
                continue
            loops = node.get("Actual Loops", 0)
            if node["Node Type"] == "Seq Scan" and loops > 1:
                quadratic.append((statement_of(p["Query Text"]) or p["Query Text"][:80], loops))
            if node["Node Type"] in ("Index Scan", "Index Only Scan") and node.get("Index Name") == "sources_pkey":
                looked_up += loops
    assert quadratic == [], f"a statement reads every source once per row: {quadratic}"
    # the per-row look-ups did run (else the check above proves nothing):
    # one per candidate row of the history tables and the outbox
    assert looked_up >= 2000, looked_up
