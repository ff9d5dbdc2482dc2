"""Two builds of one tree give one package, byte for byte.

cargo-pgrx 0.18.1 orders the install script's independent blocks anew in
every run (the reason and its source: scripts/canonical_install_sql.py);
scripts/package.sh puts them in one canonical order. Proved here without a
second release build from scratch: `cargo pgrx schema` twice on the release
library scripts/package.sh built (under a second each) gives two scripts
that canonicalize to the same text, the one in the .deb; then
scripts/package.sh runs again (cargo finds that build fresh: about 10 s)
and its .deb must equal the one under test, which also covers every date,
mode, owner and compression setting (SOURCE_DATE_EPOCH, dpkg-deb's
threads). Not covered: a checkout at another path, which changes the
library (rustc and cc record the build's paths; scripts/package.sh says
so).

The tree must be the one the .deb was built from (scripts/test.sh builds
it right before; otherwise the fixture builds it). Needs cargo-pgrx and the
pg_config `cargo pgrx init` registered for the .deb's major version.
"""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pkgsupport import ROOT, run

CANONICAL = ROOT / "scripts" / "canonical_install_sql.py"


def cargo_env() -> dict:
    return {**os.environ, "PATH": f"{Path.home() / '.cargo' / 'bin'}:{os.environ['PATH']}"}


def install_script_of(deb: Path, expected, into: Path) -> Path:
    run(["dpkg-deb", "-x", str(deb), str(into)])
    found = list(into.glob(f"usr/share/postgresql/*/extension/webhook_dedup--{expected.version}.sql"))
    assert len(found) == 1, found
    return found[0]


def schema_run(expected, out: Path) -> str:
    """One `cargo pgrx schema` of the release library scripts/package.sh
    built (target/release), as pgrx orders it. --skip-build: the script
    comes from that very library; and a build by `cargo pgrx schema` would
    not be fresh for `cargo pgrx package` (nor the other way round: the two
    give pgrx-pg-sys's build script different environments, measured 40 s
    of rebuilding on 2 cores at each switch)."""
    run(["cargo", "pgrx", "schema", f"pg{expected.pg_major}", "--release", "--skip-build", "--no-default-features",
         "--features", f"pg{expected.pg_major}", "-o", str(out)], cwd=ROOT, env=cargo_env())
    return out.read_text()


def canonical(path: Path) -> str:
    out = path.with_suffix(".canonical.sql")
    run([sys.executable, str(CANONICAL), "--source-root", str(ROOT), str(path), "-o", str(out)])
    return out.read_text()


def test_two_schema_runs_one_canonical_script_the_packaged_one(deb, expected, tmp_path):
    packaged = install_script_of(deb, expected, tmp_path / "deb").read_text()
    first, second = tmp_path / "first.sql", tmp_path / "second.sql"
    texts = [schema_run(expected, first), schema_run(expected, second)]
    # Two runs usually differ (they did in every run tried on 2026-12-01);
    # when they happen not to, the comparisons below still hold.
    assert sorted(texts[0].split("\n")) == sorted(texts[1].split("\n")), "the same lines, at most reordered"
    assert canonical(first) == canonical(second) == packaged
    # the packaged script is canonical already: canonicalizing changes nothing
    assert canonical(install_script_of(deb, expected, tmp_path / "again")) == packaged


def members(deb: Path) -> dict:
    """sha256 of the .deb's ar members, and of each file and its tar
    header fields (dpkg-deb --contents), to say what differs."""
    listing = run(["dpkg-deb", "--contents", str(deb)])
    sums = {"ar " + name: hashlib.sha256(subprocess.run(["ar", "p", str(deb), name], check=True,
                                                        capture_output=True).stdout).hexdigest()
            for name in run(["ar", "t", str(deb)]).split()}
    return {**sums, "data.tar listing": listing}


def test_a_second_build_gives_the_same_deb(deb, expected, tmp_path):
    done = subprocess.run([str(ROOT / "scripts" / "package.sh"), "--out", str(tmp_path)],
                          capture_output=True, text=True, env=cargo_env())
    assert done.returncode == 0, done.stderr[-5000:]
    again = tmp_path / expected.file_name
    tarball = f"webhook_dedup-{expected.version}.tar.gz"
    if (deb.parent / tarball).is_file():  # scripts/test.sh's: built next to the .deb
        assert (tmp_path / tarball).read_bytes() == (deb.parent / tarball).read_bytes(), "two source tarballs differ"
    # the SQL edition's two artifacts (written for every build; compared
    # with scripts/test.sh's, built next to the .deb)
    for name in (f"webhook_dedup-tle--{expected.version}.sql", f"webhook_dedup-sql--{expected.version}.sql"):
        assert (tmp_path / name).is_file(), f"scripts/package.sh wrote no {name}"
        if (deb.parent / name).is_file():
            assert (tmp_path / name).read_bytes() == (deb.parent / name).read_bytes(), f"two builds' {name} differ"
    if again.read_bytes() != deb.read_bytes():
        first, second = members(deb), members(again)
        differ = {k: (first.get(k), second.get(k)) for k in first.keys() | second.keys() if first.get(k) != second.get(k)}
        a = install_script_of(deb, expected, tmp_path / "a")
        b = install_script_of(again, expected, tmp_path / "b")
        files = []
        for p in sorted((tmp_path / "a").rglob("*")):
            other = tmp_path / "b" / p.relative_to(tmp_path / "a")
            if p.is_file() and (not other.is_file() or p.read_bytes() != other.read_bytes()):
                files.append(str(p.relative_to(tmp_path / "a")))
        pytest.fail(f"two builds differ: members {sorted(differ)}; files {files}; install scripts "
                    f"{'equal' if a.read_bytes() == b.read_bytes() else 'differ'}", pytrace=False)
