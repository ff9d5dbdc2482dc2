"""docs/providers.md's table "How each provider takes answers, Per
provider" says what webhook_dedup.providers says: each scheme's response
deadline, default wait, 4xx policy, disable rule and stop signal (the
view is the profiles in crates/webhook-dedup-core/src/profile.rs). A
profile changed without the document, or the document without the
profile, fails here. Also: the examples' statement that a login without
any of the extension's roles may call webhook_dedup.http_answer (it
changes nothing) and nothing else.
"""

import re
from pathlib import Path

import psycopg
import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "providers.md"


def seconds(text: str):
    """'15 s' -> 15; 'not documented ...' -> None."""
    m = re.fullmatch(r"(\d+) s", text)
    return int(m.group(1)) if m else None


def doc_rows():
    text = DOC.read_text()
    start = text.index("### Per provider")
    table = text[start:text.index("\n\n", text.index("| scheme | response deadline", start))]
    rows = {}
    for line in table.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        scheme = cells[0].strip("`")
        stop = None if cells[6] == "none" else cells[6].strip("`")
        rows[scheme] = (seconds(cells[1]), seconds(cells[2]), cells[3], cells[5], stop)
    return rows


def test_the_per_provider_table_is_the_view(connect):
    with connect() as conn:
        view = {
            scheme: (deadline, wait, retries, rule, stop)
            for scheme, deadline, wait, retries, rule, stop in conn.execute(
                "SELECT scheme, extract(epoch FROM response_deadline)::int, extract(epoch FROM default_wait)::int,"
                " retries_4xx, disable_rule, stop_signal FROM webhook_dedup.providers"
            )
        }
    assert doc_rows() == view


def test_any_login_may_ask_for_an_answer_and_change_nothing(connect):
    with connect() as conn:
        conn.execute("DROP ROLE IF EXISTS answer_nobody")
        conn.execute("CREATE ROLE answer_nobody LOGIN")
    try:
        with psycopg.connect("user=answer_nobody", autocommit=True) as nobody:
            status, headers, body = nobody.execute(
                "SELECT * FROM webhook_dedup.http_answer('retry_later', 'github', retry_after => '4 s')"
            ).fetchone()
            assert (status, headers, body) == (
                503, {"Content-Type": "application/json", "Retry-After": "4"}, {"status": "retry_later"})
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                nobody.execute("SELECT * FROM webhook_dedup.webhook_receive('github', '{}'::bytea, '{}', ARRAY['s'])")
    finally:
        with connect() as conn:
            conn.execute("DROP ROLE answer_nobody")
