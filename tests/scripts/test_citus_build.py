"""scripts/lib.sh's Citus per PostgreSQL major, without a build: the Citus
extension version each major gets (citus_extversion), and citus_build's
choice of source: the tarball as it is where the server's access/genam.h
declares systable_inplace_update_begin, else a copy with
scripts/citus/inplace-update-before-16.5.c inserted into columnar's
columnar_metadata.c after its last #include (a fake pg_config and a fake
build script that records what it was given)."""

import io
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIM = (ROOT / "scripts" / "citus" / "inplace-update-before-16.5.c").read_text()
METADATA = "citus-14.0.1/src/backend/columnar/columnar_metadata.c"


def lib_sh(commands: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f'source "{ROOT}/scripts/lib.sh"\n{commands}'],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", **env})


def test_each_major_gets_its_citus():
    out = lib_sh("for m in 15 16 17 18; do citus_extversion $m; done")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["13.2-1", "14.0-1", "14.0-1", "14.0-1"]
    assert lib_sh("citus_extversion 14").returncode != 0


def fake_source(tmp_path: Path, genam: str) -> tuple[Path, Path]:
    """A Citus source folder (build.sh and a citus-14.0.1 tarball) and a
    pg_config of major 16 whose server headers hold `genam`."""
    source = tmp_path / "citus"
    source.mkdir()
    # the build script copies what it builds, as the real one untars it
    (source / "build.sh").write_text(
        '#!/bin/bash\nset -e\nHERE=$(cd "$(dirname "$0")" && pwd)\n'
        'tar -xzf "$HERE/citus-14.0.1.tar.gz" -C "$RECORD"\necho "$1" > "$RECORD/pg_config"\n')
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        body = b'#include "postgres.h"\n#include "distributed/listutils.h"\n\nstatic int stripe;\n'
        info = tarfile.TarInfo(METADATA)
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    (source / "citus-14.0.1.tar.gz").write_bytes(buf.getvalue())
    server = tmp_path / "include" / "server"
    (server / "access").mkdir(parents=True)
    (server / "access" / "genam.h").write_text(genam)
    pg_config = tmp_path / "pg_config"
    pg_config.write_text(f'#!/bin/bash\ncase $1 in --includedir-server) echo {server};; '
                         f'--version) echo "PostgreSQL 16.2";; esac\n')
    pg_config.chmod(0o755)
    return source, pg_config


def build(tmp_path: Path, genam: str) -> str:
    source, pg_config = fake_source(tmp_path, genam)
    record = tmp_path / "record"
    record.mkdir()
    done = lib_sh(f'PG_MAJOR=16 PG_CONFIG={pg_config} citus_build', WEBHOOK_DEDUP_CITUS_SOURCE=str(source),
                  RECORD=str(record))
    assert done.returncode == 0, done.stderr
    assert (record / "pg_config").read_text().strip() == str(pg_config)
    return (record / METADATA).read_text()


def test_a_server_before_16_5_builds_the_source_with_the_stand_ins(tmp_path):
    text = build(tmp_path, "extern void systable_beginscan(void);\n")
    head, rest = text.split('#include "distributed/listutils.h"\n', 1)
    assert rest.startswith(SHIM), "the stand-ins come right after the last #include"
    assert rest.endswith("static int stripe;\n")


def test_a_server_that_has_the_functions_builds_the_source_as_it_is(tmp_path):
    text = build(tmp_path, "extern void systable_inplace_update_begin(void);\n")
    assert "systable_inplace_update_begin" not in text
    assert text.endswith('#include "distributed/listutils.h"\n\nstatic int stripe;\n')
