"""scripts/lib.sh's choice of a PostgreSQL per major, without a download
or a build: use_pg_major picks the system's build (Debian's layout) when
it is whole, else the PyPI build pg_wheel names, and every wheel pg_wheel
names is pinned with its SHA-256 in scripts/postgresql-wheels.txt (pip
download --require-hashes)."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def lib_sh(commands: str, **env) -> str:
    done = subprocess.run(["bash", "-c", f'source "{ROOT}/scripts/lib.sh"\n{commands}'],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", **env})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_debian_major_is_the_system_build(tmp_path):
    out = lib_sh('use_pg_major "$DEBIAN_PG_MAJOR"; echo "$PG_MAJOR $PG_CONFIG"', WEBHOOK_DEDUP_PG_WHEELS=str(tmp_path))
    major = lib_sh('echo "$DEBIAN_PG_MAJOR"').strip()
    assert out.split() == [major, f"/usr/lib/postgresql/{major}/bin/pg_config"]


def test_a_major_missing_here_is_the_wheels(tmp_path):
    for major in ("16", "18"):
        if Path(f"/usr/lib/postgresql/{major}/bin/postgres").exists():
            continue  # installed on this machine: the system's wins, as it should
        name, version, prefix = lib_sh(f"pg_wheel {major}").split()
        out = lib_sh(f'use_pg_major {major}; echo "$PG_CONFIG"', WEBHOOK_DEDUP_PG_WHEELS=str(tmp_path)).strip()
        assert out == f"{tmp_path}/{major}/{prefix}/bin/pg_config"


def test_a_major_nobody_builds_stays_in_debians_layout(tmp_path):
    out = lib_sh('use_pg_major 12; echo "$PG_CONFIG"', WEBHOOK_DEDUP_PG_WHEELS=str(tmp_path)).strip()
    assert out == "/usr/lib/postgresql/12/bin/pg_config"


def test_every_wheel_is_pinned_by_hash():
    pins = {}
    for line in (ROOT / "scripts" / "postgresql-wheels.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            m = re.fullmatch(r"(\S+)==(\S+) --hash=sha256:([0-9a-f]{64})", line)
            assert m, line
            pins[m.group(1)] = m.group(2)
    majors = lib_sh('echo "${PG_TESTED_MAJORS[@]}"; echo "$DEBIAN_PG_MAJOR"').split()
    debian = majors.pop()
    for major in majors:
        if major == debian:
            continue
        name, version, _ = lib_sh(f"pg_wheel {major}").split()
        assert pins.get(name) == version, (major, name, version, pins)
