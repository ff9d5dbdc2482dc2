"""examples/sql/walkthrough.sql, the psql walk-through for newcomers, run
with psql against the cluster of the libpq environment variables (see
conftest.py) as a reader would run it: it must finish with exit code 0 and
print every check it makes. And each of its checks must be able to fail:
the walk-through is run once per check with that check's condition negated,
and must then stop with a non-zero exit code at that check.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from support import REPO

WALKTHROUGH = REPO / "examples" / "sql" / "walkthrough.sql"
EXPECT = "walkthrough.expect("
# Lines the walk-through prints on the way (besides one 'ok: ...' per check).
KEY_LINES = [
    "the key of evt_1001: shop:evt_1001",
    "ok: the first delivery is claimed: process it",
    "ok: a retry during the lease is in_progress",
    'the retry is answered 503 {"status": "in_progress"}',
    "ok: it is answered 503 with Retry-After: the seconds left on our lease",
    "ok: our answer is 200 with our result",
    'the redelivery gets: duplicate {"order": "A-1", "status": 200}',
    "ok: it carries the stored result",
    "ok: the redelivery is answered 200 with the first answer's body",
    'ok: an accepted delivery is answered 200 {"status": "accepted"}',
    "worker A took shop:evt_2001",
    "worker B took shop:evt_2002",
    "ok: worker B gets evt_2002, not the leased evt_2001",
    "ok: nothing is due while worker A holds evt_2001",
    "ok: each order was shipped once",
    "the sender sends Idempotency-Key: refund:shop:shop%3Aevt_3001",
    "ok: attempt 2 carries the same downstream key",
    "ok: the current lease token acknowledges the delivery",
    "walkthrough complete",
]


def psql() -> str:
    """psql of the server under test (scripts/test.sh sets WEBHOOK_DEDUP_PG_BIN), else the one on PATH."""
    pg_bin = os.environ.get("WEBHOOK_DEDUP_PG_BIN")
    found = str(Path(pg_bin) / "psql") if pg_bin else shutil.which("psql")
    if not found:
        pytest.fail("psql not found: set WEBHOOK_DEDUP_PG_BIN or put psql on PATH", pytrace=False)
    return found


def run_psql(script: Path) -> subprocess.CompletedProcess:
    return subprocess.run([psql(), "-X", "-v", "ON_ERROR_STOP=1", "-f", str(script)],
                          capture_output=True, text=True, timeout=120)


def checks(text: str) -> list:
    """(start, end, condition, what) of every call walkthrough.expect(condition, 'what'):
    the condition is text[start:end]."""
    found = []
    start = text.find(EXPECT)
    while start != -1:
        i = start + len(EXPECT)
        if text[:start].endswith("FUNCTION "):  # its definition
            start = text.find(EXPECT, i)
            continue
        depth, quoted, comma = 0, False, None
        while True:
            ch = text[i]
            if quoted:
                if ch == "'" and text[i + 1:i + 2] == "'":
                    i += 1  # a quote in a literal, written twice
                elif ch == "'":
                    quoted = False
            elif ch == "'":
                quoted = True
            elif ch in "([":
                depth += 1
            elif ch in ")]" and depth > 0:
                depth -= 1
            elif ch == ")":
                break
            elif ch == "," and depth == 0 and comma is None:
                comma = i
            i += 1
        what = re.fullmatch(r"\s*'((?:[^']|'')*)'\s*", text[comma + 1:i]).group(1).replace("''", "'")
        found.append((start + len(EXPECT), comma, text[start + len(EXPECT):comma], what))
        start = text.find(EXPECT, i)
    return found


def test_walkthrough_runs_and_prints_its_checks(db_conn):
    done = run_psql(WALKTHROUGH)
    assert done.returncode == 0, f"psql exited with {done.returncode}:\n{done.stdout}\n{done.stderr}"
    lines = done.stdout.splitlines()
    for line in KEY_LINES:
        assert line in lines, f"missing line {line!r} in:\n{done.stdout}"
    found = checks(WALKTHROUGH.read_text())
    assert found, "no checks found in the walk-through"
    assert [line for line in lines if line.startswith("ok: ")] == [f"ok: {what}" for *_, what in found]
    assert not db_conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'walkthrough'").fetchall(), \
        "the walk-through left its schema behind"
    assert db_conn.execute("SELECT count(*) FROM webhook_dedup.keys WHERE source = 'shop'").fetchone()[0] == 0, \
        "the walk-through left keys behind"


def test_every_check_can_fail(db_conn, tmp_path):
    text = WALKTHROUGH.read_text()
    found = checks(text)
    assert found, "no checks found"
    for start, comma, condition, what in found:
        broken = tmp_path / "broken.sql"
        broken.write_text(f"{text[:start]}NOT ({condition}){text[comma:]}")
        done = run_psql(broken)
        assert done.returncode != 0, f"negating the check {what!r} did not make psql fail"
        assert f"walkthrough: expected {what}" in done.stderr, \
            f"negating {what!r} failed elsewhere:\n{done.stderr}"
    # a run stopped half-way is cleaned up by the next run
    assert run_psql(WALKTHROUGH).returncode == 0
