"""No line of the hand-written SQL (src/sql/*.sql) is over 200 characters.

A long text, a COMMENT's above all, is written as adjacent string literals,
one per line: PostgreSQL joins string constants separated by whitespace
that holds a newline into one constant, so the text stays what it was
(the upgrade layer compares each object's comment after an update with a
fresh install's):

    COMMENT ON VIEW webhook_dedup.counters IS
      'Every counter per bucket (bucket_width 1 hour: per source and event '
      'type; ...';

Text only, no database.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 200


def test_no_line_of_src_sql_is_over_200_characters():
    files = sorted((ROOT / "src" / "sql").glob("*.sql"))
    assert files, "no src/sql/*.sql found"
    long = [
        f"{path.relative_to(ROOT)}:{number}: {len(line)} characters"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if len(line) > LIMIT
    ]
    assert not long, "lines over 200 characters (split a long string into adjacent literals):\n" + "\n".join(long)
