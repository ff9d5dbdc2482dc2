"""Every statement of the SQL edition names its operators, functions and
types schema-qualified (the brief's rule; docs/security.md).

Most of the edition's functions run with the caller's search_path: a SET
clause would keep the planner from inlining them and cost a GUC switch on
every call. So nothing in a body may be looked up through search_path: a
database owner who puts a schema of theirs first (tests/cluster/
test_security.py sets exactly that trap, run against this edition too)
would otherwise have a superuser's call run their `=`. PostgreSQL looks up
by name, through search_path, more than the operators written out:

- a simple CASE (`CASE x WHEN 'a'`), NULLIF, IS [NOT] DISTINCT FROM,
  `x IN (list)`, BETWEEN, LIKE and `JOIN ... USING` compare with the `=`
  (or `<=`, `~~`) it finds by name (parse_expr.c, make_op);
- a type name that is not a keyword of the grammar (`text`, `bytea`,
  `jsonb`, `timestamptz`, `uuid`; `integer`, `bigint`, `numeric`,
  `boolean`, `interval` are keywords, always pg_catalog's) in a cast, a
  PL/pgSQL declaration or a column definition list, which PL/pgSQL and
  `AS $$` SQL bodies resolve when first run.

This test reads editions/sql (comments and string literals left out) and
lists every such place; it needs no server.
"""

import re
from pathlib import Path

EDITION = Path(__file__).resolve().parents[2] / "editions" / "sql"

UNQUALIFIED_TYPES = r"(?:text|bytea|jsonb|json|timestamptz|uuid|regtype|regclass|date|name|oid|varbit)"
RULES = [
    ("an operator without OPERATOR(pg_catalog.)",
     re.compile(r"(?<![:<>=!~|+\-*/%&^#@.(\w])\s*(=|<>|!=|<=|>=|<|>|\|\||\+|\*|/|%|~~\*?|!~~\*?|~\*?|!~\*?|->>|->|#>>|#>|@>|"
                r"<@|\?\||\?&|&&)(?![=>|~*&@#.])")),
    ("a binary minus without OPERATOR(pg_catalog.-)", re.compile(r"[\w)\]]\s+-\s+[\w(]")),
    ("NULLIF (its = is looked up by name)", re.compile(r"\bNULLIF\s*\(", re.I)),
    ("IS DISTINCT FROM (its = is looked up by name)", re.compile(r"\bIS\s+(?:NOT\s+)?DISTINCT\s+FROM\b", re.I)),
    ("IN (a list) (its = is looked up by name)", re.compile(r"\bIN\s*\((?!\s*SELECT\b)", re.I)),
    ("BETWEEN, LIKE or SIMILAR TO", re.compile(r"\b(?:BETWEEN|I?LIKE|SIMILAR\s+TO)\b", re.I)),
    ("JOIN ... USING or NATURAL JOIN", re.compile(r"\bJOIN\b[^;]*?\bUSING\s*\(|\bNATURAL\s+JOIN\b", re.I)),
    ("a simple CASE (CASE x WHEN)", re.compile(r"(?<!END )\bCASE\s+(?!WHEN\b)(?=\S)", re.I)),
    ("a cast to an unqualified type", re.compile(r"::" + UNQUALIFIED_TYPES + r"\b(?!\s*\()")),
]
# a declaration in a DECLARE section, or a column of a definition list
DECLARED = re.compile(r"^\s+\w+\s+(?:CONSTANT\s+)?" + UNQUALIFIED_TYPES + r"\b")
COLUMN = re.compile(r"\bAS\s+\w+\s*\(([^()]*)\)", re.S)


def code_of(text: str) -> str:
    """The text with comments, string literals and quoted names blanked
    (line numbers kept), and the allowed forms taken out."""
    text = re.sub(r"--[^\n]*", "", text)
    text = re.sub(r"E'(?:[^'\\]|\\.|'')*'|'(?:[^']|'')*'", "''", text)
    text = re.sub(r'"[^"\n]*"', '""', text)
    text = re.sub(r"OPERATOR\(pg_catalog\.[^)]+\)\s*(?:ANY|ALL)?", " OP ", text)
    # PL/pgSQL and DDL forms that are no operator
    text = re.sub(r":=|=>|::(?=pg_catalog\.|webhook_dedup\.)|\.\.", " ", text)
    text = re.sub(r"\b(?:ERRCODE|HINT|DETAIL|MESSAGE|COLUMN|CONSTRAINT|DATATYPE|TABLE|SCHEMA)\s*=", " ", text)
    text = re.sub(r"\b\w+\s*=\s*(?:MESSAGE_TEXT|RETURNED_SQLSTATE|ROW_COUNT|PG_\w+)", " ", text)
    text = re.sub(r"\bSET\s+(?:LOCAL\s+)?\w+\s*(?:=|TO)", " ", text, flags=re.I)
    text = re.sub(r"\b(?:REVOKE|GRANT|UNION|RETURNING)\s+(?:ALL|\*)", " ", text)
    text = re.sub(r"\(\s*\*\s*\)|SELECT\s+\*|\.\*|,\s*\*", " ", text)
    text = re.sub(r"(^|[(,\s])-\s*(?=\d)", r"\1 ", text)  # a negative number
    text = re.sub(r"\d+\.?\d*e-\d+", "0", text)  # a float literal's exponent
    return text


def test_nothing_is_looked_up_through_search_path():
    files = sorted(EDITION.rglob("*.sql"))
    assert len(files) > 20, files
    found = []
    for path in files:
        code = code_of(path.read_text())
        lines = code.split("\n")
        in_declare = False
        for n, line in enumerate(lines, 1):
            for what, rule in RULES:
                if rule.search(line):
                    found.append(f"{path.relative_to(EDITION)}:{n}: {what}: {line.strip()[:120]}")
            if line.strip() == "DECLARE":
                in_declare = True
            elif re.match(r"\s*BEGIN\b", line):
                in_declare = False
            elif in_declare and DECLARED.search(line):
                found.append(f"{path.relative_to(EDITION)}:{n}: a declaration of an unqualified type: {line.strip()}")
        for m in COLUMN.finditer(code):
            if re.search(r"\w\s+" + UNQUALIFIED_TYPES + r"\b", m.group(1)):
                n = code[:m.start()].count("\n") + 1
                found.append(f"{path.relative_to(EDITION)}:{n}: a column definition of an unqualified type")
    assert found == [], "\n".join(found)


def test_the_rules_find_what_they_are_for():
    # each rule catches its form (a rule that matches nothing would pass
    # the test above vacuously)
    samples = [["IF a = b THEN", "x := a || b;", "WHERE a <> 'x'"], ["RETURN a - b;"], ["x := NULLIF(a, '');"],
               ["IF a IS DISTINCT FROM b THEN"], ["WHERE a IN ('x', 'y')"], ["WHERE a BETWEEN 1 AND 2", "WHERE a LIKE 'x%'"],
               ["FROM a JOIN b USING (c)"], ["x := CASE a WHEN 1 THEN 2 END;", "CASE kind\n  WHEN 'a' THEN"],
               ["x := y::text;", "x := y::jsonb;"]]
    assert len(samples) == len(RULES)
    for forms, (what, rule) in zip(samples, RULES):
        for sample in forms:
            assert rule.search(code_of(sample)), (what, sample)
    allowed = ["IF a OPERATOR(pg_catalog.=) b THEN", "x := -1;", "RAISE EXCEPTION 'a = b' USING ERRCODE = 'x';",
               "SELECT count(*) FROM t", "x := CASE WHEN a THEN 1 END;", "x := y::pg_catalog.text;",
               "WHERE a OPERATOR(pg_catalog.=) ANY (ARRAY['x'])", "REVOKE ALL ON FUNCTION f() FROM PUBLIC;",
               "SET LOCAL lock_timeout = 0", "END CASE;", "FOR i IN 1 .. n LOOP"]
    for sample in allowed:
        assert not any(rule.search(code_of(sample)) for _, rule in RULES), sample
    assert DECLARED.search("  raw text;") and not DECLARED.search("  raw pg_catalog.text;")
