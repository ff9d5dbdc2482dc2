"""examples/README.md's table of HTTP answers against the function that
computes them, webhook_dedup.http_answer, for the github scheme: every row's
status, headers and (where the row gives it as JSON) body must be the
function's, and the table must name every outcome a receiver can meet. The
table is documentation of the function, never a second source of truth.
"""

import json
import re

import pytest

from support import REPO, http_answer

README = REPO / "examples" / "README.md"
# Every outcome a receiver of examples/README.md can meet (webhook_receive's
# outcomes and refusals, and what becomes of its own work): each needs a row.
RECEIVER_OUTCOMES = {"claimed", "reclaimed", "duplicate", "in_progress", "conflict", "retry_later",
                     "unknown_outcome", "dead_lettered", "accepted", "ignored", "handshake", "rejected",
                     "missing_event_id", "repeated_header", "lease_lost", "error"}
# The Retry-After http_answer is asked for when a row shows one (`<...>`: a
# number of seconds the database fills in).
RETRY_AFTER_S = 7
NAMES = re.compile(r"^((?:`[a-z_]+`(?:, )?)+)")
CODE = re.compile(r"`([^`]*)`")


def table_rows() -> list:
    """The cells of every row of the table whose second column is `http_status`."""
    rows, in_table = [], False
    for line in README.read_text().splitlines():
        if not line.startswith("|"):
            in_table = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 1 and cells[1] == "`http_status`":
            in_table = True
        elif in_table and not set(cells[0]) <= set("- "):
            rows.append(cells)
    return rows


ROWS = table_rows()


def outcomes(cell: str) -> list:
    """The outcomes a row is about: the names in backquotes it starts with."""
    found = NAMES.match(cell)
    assert found, f"a row of the answer table does not start with its outcomes: {cell!r}"
    return re.findall(r"`([a-z_]+)`", found.group(1))


def test_the_table_is_there_and_names_every_outcome():
    assert len(ROWS) >= 10, ROWS
    named = [name for cells in ROWS for name in outcomes(cells[0])]
    assert len(named) == len(set(named)), f"an outcome has two rows: {named}"
    assert RECEIVER_OUTCOMES <= set(named), f"no row for {sorted(RECEIVER_OUTCOMES - set(named))}"


@pytest.mark.parametrize("cells", ROWS, ids=[", ".join(outcomes(c[0])) for c in ROWS])
def test_each_row_is_the_answer_of_http_answer(db_conn, cells):
    names, status, headers, body = cells
    shown = dict(h.split(": ", 1) for h in CODE.findall(headers))
    retry_after = RETRY_AFTER_S if any(v.startswith("<") for v in shown.values()) else None
    for outcome in outcomes(names):
        mode = "enqueue" if outcome == "accepted" else "claim"
        expected = http_answer(db_conn, outcome, "github", retry_after=retry_after, mode=mode)
        assert int(status) == expected.http_status, (outcome, status, expected)
        # the same header names, and the same values where the row gives one
        assert set(shown) == set(expected.http_headers), (outcome, headers, expected.http_headers)
        for name, value in shown.items():
            want = str(RETRY_AFTER_S) if value.startswith("<") else value
            assert expected.http_headers[name] == want, (outcome, name, expected.http_headers)
        # a body given as JSON (`{"status": "<outcome>"}` standing for each
        # outcome of the row), or NULL
        literals = [c for c in CODE.findall(body) if c.startswith("{")]
        if literals:
            want = [json.loads(c.replace("<outcome>", outcome)) for c in literals]
            assert expected.response in want, (outcome, body, expected.response)
        if body.startswith("NULL"):
            assert expected.response is None, (outcome, expected.response)
