"""scripts/check-layers.sh, the lint of the store's boundary (docs/design.md,
"Layout"): it passes on this checkout, and fails, naming file and line,
on a copy of src/ with a violation of each rule planted in it (the script
takes the tree to check as its argument). No build: grep over the files."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check-layers.sh"


def check(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), str(tree)], capture_output=True, text=True, timeout=120)


@pytest.fixture
def tree(tmp_path):
    """A copy of src/ (the Rust and the statement files) to plant in."""
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("target"))
    return tmp_path


def plant(tree: Path, path: str, text: str) -> int:
    """Append `text` to src file `path`; the line number of its first line."""
    file = tree / path
    before = file.read_text()
    if not before.endswith("\n"):
        before += "\n"
    file.write_text(before + text)
    return before.count("\n") + 1


def test_the_checkout_passes():
    done = check(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "are the store's alone" in done.stdout


def test_the_copy_passes_before_anything_is_planted(tree):
    done = check(tree)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_key_column_in_the_surface_and_a_statement_in_the_engine_fail(tree):
    col = plant(tree, "src/api/archive.rs", "fn planted() {\n    let _ = Col::State;\n}\n") + 1
    statement = plant(
        tree,
        "src/engine/claim.rs",
        'static PLANTED: crate::spi::Statement =\n    crate::spi::Statement::new(c"SELECT 1", &[]);\n',
    ) + 1
    done = check(tree)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"src/api/archive.rs:{col}: Col:: outside src/store/" in done.stdout
    assert f"src/engine/claim.rs:{statement}: a statement prepared outside src/store/" in done.stdout
    assert "2 finding(s)" in done.stderr


def test_a_statement_file_read_outside_the_store_fails(tree):
    line = plant(tree, "src/maintenance/prune.rs", 'const SQL: &std::ffi::CStr = crate::sql_statement!("key_read.sql");\n')
    done = check(tree)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"src/maintenance/prune.rs:{line}: a statement prepared outside src/store/" in done.stdout


def test_importing_the_direct_writes_values_fails_even_over_several_lines(tree):
    line = plant(tree, "src/maintenance/sweep.rs", "use crate::store::direct_writes::{\n    Session,\n    Values,\n};\n")
    done = check(tree)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"src/maintenance/sweep.rs:{line}: imports the direct writes' Col or Values" in done.stdout


def test_comments_are_not_code(tree):
    plant(tree, "src/api/archive.rs", "// Col::State is the store's; so is Statement::new(...)\n")
    done = check(tree)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_statement_named_for_another_store_file_fails(tree):
    statements = tree / "src" / "sql" / "statements"
    (statements / "key_read.sql").rename(statements / "transitions_read.sql")
    store = tree / "src" / "store" / "mod.rs"
    store.write_text(store.read_text().replace('sql_statement!("key_read.sql")', 'sql_statement!("transitions_read.sql")'))
    done = check(tree)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "src/store/mod.rs:" in done.stdout
    assert "prepares transitions_read.sql, whose name is not this file's: name it key_<what>.sql" in done.stdout


def test_a_statement_file_nobody_prepares_fails(tree):
    (tree / "src" / "sql" / "statements" / "claim_orphan.sql").write_text("SELECT 1\n")
    done = check(tree)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "src/sql/statements/claim_orphan.sql:1: prepared by no file of src/store/" in done.stdout
