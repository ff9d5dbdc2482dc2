"""Names and helpers shared by the package tests and their fixtures."""

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# OwnCluster, the throwaway clusters of the cluster tests
sys.path.insert(0, str(ROOT / "tests" / "cluster"))


def lib_sh(*functions: str) -> list:
    """The output lines of scripts/lib.sh's functions, called in order."""
    script = f"source '{ROOT}/scripts/lib.sh' && " + " && ".join(functions)
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"scripts/lib.sh: {' && '.join(functions)} failed:\n{done.stderr}", pytrace=False)
    return done.stdout.splitlines()


@dataclass(frozen=True)
class Expected:
    """What scripts/package.sh names and puts in the package."""
    name: str
    version: str
    arch: str
    pg_major: str
    maintainer: str
    abstract: str

    @property
    def file_name(self) -> str:
        return f"{self.name}_{self.version}_{self.arch}.deb"


def run(cmd, **kwargs) -> str:
    """stdout of cmd; the test fails with its output when it exits non-zero."""
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} exited with {done.returncode}:\n{done.stdout[-3000:]}\n"
                    f"{done.stderr[-3000:]}", pytrace=False)
    return done.stdout


def pg_config(*args: str) -> str:
    """pg_config of the PostgreSQL the package is for (WEBHOOK_DEDUP_PG_BIN, set by scripts/test.sh)."""
    pg_bin = os.environ.get("WEBHOOK_DEDUP_PG_BIN")
    if not pg_bin:
        pytest.fail("the package tests need WEBHOOK_DEDUP_PG_BIN (scripts/test.sh sets it)", pytrace=False)
    return run([str(Path(pg_bin) / "pg_config"), *args]).strip()


def without_third_party(paths, expected: Expected) -> set:
    """`paths` but the third-party licence files
    (/usr/share/doc/<package>/third-party/, one folder per linked crate)."""
    folder = f"/usr/share/doc/{expected.name}/third-party/"
    return {p for p in paths if not p.startswith(folder)}


def debian_dirs(expected: Expected) -> tuple:
    """Where the package puts the library and the extension's files: Debian's
    layout for the major (postgresql-common), whichever build compiled it (a
    major Debian 12 lacks is built against a PyPI build, scripts/lib.sh)."""
    return (f"/usr/lib/postgresql/{expected.pg_major}/lib",
            f"/usr/share/postgresql/{expected.pg_major}/extension")


def expected_files(expected: Expected) -> set:
    """Every regular file the package installs, but the third-party licence
    files (see without_third_party)."""
    lib, ext = debian_dirs(expected)
    upgrades = {f"{ext}/{p.name}" for p in (ROOT / "sql").glob("webhook_dedup--*--*.sql")}
    doc = f"/usr/share/doc/{expected.name}"
    return {
        f"{lib}/webhook_dedup.so",
        f"{ext}/webhook_dedup.control",
        f"{ext}/webhook_dedup--{expected.version}.sql",
        f"{doc}/copyright",
        f"{doc}/changelog.gz",
    } | upgrades
