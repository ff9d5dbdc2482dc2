"""The hand-written SQL files run after every function they need.

cargo-pgrx writes the install script in an order of its own: one block per
`extension_sql_file!` of src/lib.rs and per generated function, ordered
only by the dependencies it knows (pgrx-sql-entity-graph 0.18.1,
`PgrxSql::to_sql`), and otherwise differently from one run to the next
(scripts/canonical_install_sql.py says why). Only the `bootstrap` file is
sure to run first and only the `finalize` file last, after every generated
function; every other file runs after what its `requires = [...]` names
and nothing more. So a file that names a function at install time (a view
reads it, a grant or a trigger names it, a DO block casts its signature to
regprocedure) must require it: else CREATE EXTENSION fails in some builds
and not in others. The bodies of the PL/pgSQL functions a file creates do
not count: PostgreSQL resolves their names when they run.

This test reads src/lib.rs and src/sql/*.sql (text only, no database) and
checks, for each file but the bootstrap and the finalize one, that every
function `webhook_dedup.<name>(` and every view it names outside function
bodies and comments is required (the tables are the bootstrap file's):
  - created by another of these files (a view, a PL/pgSQL function): that
    file's block name (`"views"`);
  - created by an `extension_sql!` block in src/ (a trigger function):
    that block's `name`;
  - else a `#[pg_extern]` function: its Rust name, bare (`webhook_claim`;
    pgrx resolves a bare path to the function of that name).
And every src/sql/*.sql file is included exactly once.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SQL = ROOT / "src" / "sql"
LIB = ROOT / "src" / "lib.rs"

FILE_CALL = re.compile(r'extension_sql_file!\(\s*"sql/([A-Za-z0-9_]+\.sql)"(.*?)\);', re.S)
INLINE_CALL = re.compile(r'extension_sql!\(\s*r#"(.*?)"#(.*?)\);', re.S)
NAME = re.compile(r'\bname\s*=\s*"([^"]+)"')
REQUIRES = re.compile(r"\brequires\s*=\s*\[(.*?)\]", re.S)
CREATES = re.compile(r"\bCREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+webhook_dedup\.([a-z_0-9]+)\s*\(", re.I)
CREATES_VIEW = re.compile(r"\bCREATE\s+(?:OR\s+REPLACE\s+)?VIEW\s+webhook_dedup\.([a-z_0-9]+)\b", re.I)
# a CREATE FUNCTION up to the end of its dollar-quoted body
FUNCTION = re.compile(r"\bCREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\b.*?\bAS\s+(\$[A-Za-z_]*\$).*?\1", re.S | re.I)
CALLED = re.compile(r"\bwebhook_dedup\.([a-z_0-9]+)\(")
NAMED = re.compile(r"\bwebhook_dedup\.([a-z_0-9]+)\b")


def blocks():
    """Each extension_sql_file! of src/lib.rs: (file, name, flags, required block names, required paths)."""
    out = []
    for file, args in FILE_CALL.findall(LIB.read_text()):
        name = NAME.search(args)
        flags = set(re.findall(r"\b(bootstrap|finalize)\b", NAME.sub("", REQUIRES.sub("", args))))
        required = REQUIRES.search(args)
        items = [i.strip() for i in required.group(1).split(",") if i.strip()] if required else []
        names = {i.strip('"') for i in items if i.startswith('"')}
        paths = {i for i in items if not i.startswith('"')}
        out.append((file, name.group(1) if name else file.removesuffix(".sql"), flags, names, paths))
    return out


def without_comments(text):
    return re.sub(r"--[^\n]*", "", text)


def test_every_sql_file_is_included_once():
    files = [b[0] for b in blocks()]
    assert sorted(files) == sorted(p.name for p in SQL.glob("*.sql"))


def test_each_file_requires_what_it_names_at_install_time():
    created_by = {}  # function name -> block name
    view_of = {}  # view name -> block name
    for file, name, _, _, _ in blocks():
        for fn in CREATES.findall(without_comments((SQL / file).read_text())):
            created_by[fn] = name
        for view in CREATES_VIEW.findall(without_comments((SQL / file).read_text())):
            view_of[view] = name
    for rs in (ROOT / "src").rglob("*.rs"):
        for body, args in INLINE_CALL.findall(rs.read_text()):
            name = NAME.search(args)
            for fn in CREATES.findall(body):
                created_by[fn] = name.group(1)
    assert {"sources_changed", "metrics_live_cluster"} <= created_by.keys()  # the parsing found them

    missing = []
    for file, name, flags, names, paths in blocks():
        if flags:
            continue
        text = FUNCTION.sub("", without_comments((SQL / file).read_text()))
        for fn in sorted(set(CALLED.findall(text))):
            creator = created_by.get(fn)
            if creator == name:
                continue
            if creator is not None:
                if creator not in names:
                    missing.append(f'{file}: names webhook_dedup.{fn}, add "{creator}" to its requires')
            elif fn not in paths:
                missing.append(f"{file}: names webhook_dedup.{fn}, add {fn} to its requires")
        for view in sorted(set(NAMED.findall(text)) & view_of.keys()):
            if view_of[view] != name and view_of[view] not in names:
                missing.append(f'{file}: names view webhook_dedup.{view}, add "{view_of[view]}" to its requires')
    assert not missing, "\n".join(missing)


def test_one_file_is_bootstrap_and_one_finalize():
    flags = [f for b in blocks() for f in b[2]]
    assert sorted(flags) == ["bootstrap", "finalize"]
