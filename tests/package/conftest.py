"""Fixtures of the package tests: the Debian package under test and what it
should be called.

The .deb is $WEBHOOK_DEDUP_DEB when set (scripts/test.sh builds it with
scripts/package.sh first); otherwise scripts/package.sh builds it into a
temporary directory, once per session (a release build: minutes).
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from pkgsupport import ROOT, Expected, lib_sh


@pytest.fixture(scope="session")
def expected() -> Expected:
    name, version, pg_major = lib_sh("deb_package_name", "project_version", 'echo "$PG_MAJOR"')
    arch = subprocess.run(["dpkg", "--print-architecture"], check=True, capture_output=True,
                          text=True).stdout.strip()
    meta = json.loads((ROOT / "META.json").read_text())
    return Expected(name, version, arch, pg_major, meta["maintainer"], meta["abstract"])


@pytest.fixture(scope="session")
def deb(expected, tmp_path_factory) -> Path:
    given = os.environ.get("WEBHOOK_DEDUP_DEB")
    if given:
        path = Path(given).resolve()
        if not path.is_file():
            pytest.fail(f"WEBHOOK_DEDUP_DEB={given}: no such file", pytrace=False)
        return path
    out = tmp_path_factory.mktemp("package")
    done = subprocess.run([str(ROOT / "scripts" / "package.sh"), "--out", str(out)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"scripts/package.sh failed:\n{done.stderr[-5000:]}", pytrace=False)
    path = out / expected.file_name
    assert path.is_file(), f"scripts/package.sh made no {expected.file_name}:\n{done.stdout}"
    return path
