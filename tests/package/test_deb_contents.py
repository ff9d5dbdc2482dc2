"""The Debian package as built, without installing it: its control fields
(Debian Policy 5.3 and 5.6), its files, owners and modes, its copyright file,
and a server that runs from them.

The server: PostgreSQL finds its share and library directories relative to
its own executable when they share a prefix with the configured ones (as
Debian's /usr/lib/postgresql/N/bin, /usr/share/postgresql/N and
/usr/lib/postgresql/N/lib do, and a PyPI build's; src/port/path.c,
make_relative_path). So a copy of the PostgreSQL the package is for under
a temporary root, without any webhook_dedup file, plus the package's
library and extension files (dpkg-deb -x, then into the copy's library and
extension directories: for Debian's build that is where the package puts
them, for a PyPI build of another major they move from Debian's layout to
the build's), is a PostgreSQL whose only webhook_dedup is the package's; a
cluster of it preloads the library, creates the extension and claims.
Nothing outside the temporary root changes, so this runs next to other
clusters.

Runs as root (the cluster runs as WEBHOOK_DEDUP_PG_OS_USER), with
WEBHOOK_DEDUP_PG_BIN naming the installed PostgreSQL's bin directory.
"""

import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from own_cluster import OwnCluster, wait_for

from pkgsupport import ROOT, debian_dirs, expected_files, pg_config, run, without_third_party


def field(deb: Path, name: str) -> str:
    return run(["dpkg-deb", "--field", str(deb), name]).strip()


def test_control_fields(deb, expected):
    assert field(deb, "Package") == expected.name
    assert field(deb, "Version") == expected.version
    assert field(deb, "Architecture") == expected.arch
    assert field(deb, "Maintainer") == expected.maintainer
    assert field(deb, "Section") == "database"
    assert field(deb, "Priority") == "optional"
    assert int(field(deb, "Installed-Size")) > 0
    depends = [d.strip() for d in field(deb, "Depends").split(",")]
    assert depends[0] == f"postgresql-{expected.pg_major}"
    assert any(re.fullmatch(r"libc6 \(>= [0-9.]+\)", d) for d in depends), depends
    description = field(deb, "Description").splitlines()
    assert description[0] == expected.abstract
    assert all(line.startswith(" ") and len(line) <= 80 for line in description[1:]), description


def test_files_owners_and_modes(deb, expected):
    listing = run(["dpkg-deb", "--contents", str(deb)]).splitlines()
    files, dirs = {}, set()
    for line in listing:
        mode, owner, _size, _date, _time, path = line.split(maxsplit=5)
        assert owner == "root/root", line
        path = path.removeprefix(".")
        if mode.startswith("d"):
            assert mode == "drwxr-xr-x", line
            dirs.add(path.rstrip("/"))
        else:
            files[path] = mode
    assert without_third_party(files, expected) == expected_files(expected)
    assert len(files) - len(expected_files(expected)) > 50, "the crates' licence files"
    assert set(files.values()) == {"-rw-r--r--"}, files


def test_copyright_and_changelog(deb, expected, tmp_path):
    run(["dpkg-deb", "-x", str(deb), str(tmp_path)])
    doc = tmp_path / "usr" / "share" / "doc" / expected.name
    copyright_text = (doc / "copyright").read_text()
    assert copyright_text.startswith("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n")
    assert "\nLicense: Expat\n" in copyright_text
    assert json.loads((ROOT / "META.json").read_text())["license"] == "mit"
    # the crates linked in are listed with their licences
    assert re.search(r"^ pgrx v0\.18\.1: MIT$", copyright_text, re.M), copyright_text
    # and the notices their licences ask a binary to carry: the BSD-3-Clause
    # text of ed25519-dalek as published, and a list of the crates that
    # publish no licence file
    (dalek,) = (doc / "third-party").glob("ed25519-dalek-*")
    assert "Redistributions in binary form must reproduce" in (dalek / "LICENSE").read_text()
    assert "pgrx v0.18.1: MIT" in (doc / "third-party" / "README").read_text()
    changelog = run(["zcat", str(doc / "changelog.gz")])
    assert changelog.startswith(f"{expected.name} ({expected.version}) ")


@pytest.fixture
def relocated(deb, expected):
    """A copy of the installed PostgreSQL with the package's files as its only webhook_dedup."""
    if os.geteuid() != 0:
        pytest.fail("run as root: the cluster runs as another user", pytrace=False)
    pkglibdir, sharedir, bindir = (Path(pg_config(o)) for o in ("--pkglibdir", "--sharedir", "--bindir"))
    top = Path(tempfile.mkdtemp(prefix="webhook_dedup_relocated."))
    top.chmod(0o755)
    not_ours = shutil.ignore_patterns("webhook_dedup*", "bitcode")
    try:
        # a PyPI build (scripts/lib.sh ensure_pg_wheel: the unpacked wheel,
        # with a .wheel stamp) whole: its programs find their libpq in
        # <name>.libs beside the build (RPATH $ORIGIN/../../../<name>.libs)
        wheel = next((p for p in bindir.parents if (p / ".wheel").is_file()), None)
        for d in [wheel] if wheel else (bindir, pkglibdir, sharedir):
            shutil.copytree(d, top / d.relative_to("/"), symlinks=True, ignore=not_ours, dirs_exist_ok=True)
        package = top / "package"
        run(["dpkg-deb", "-x", str(deb), str(package)])
        lib, ext = (Path(d) for d in debian_dirs(expected))
        for src, dest in ((package / lib.relative_to("/"), top / pkglibdir.relative_to("/")),
                          (package / ext.relative_to("/"), top / sharedir.relative_to("/") / "extension")):
            for f in src.iterdir():
                shutil.copy2(f, dest / f.name)
        for d in (top / bindir.relative_to("/"), top / pkglibdir.relative_to("/"), top / sharedir.relative_to("/")):
            assert d.is_dir()
        yield top, top / bindir.relative_to("/")
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_a_server_runs_from_the_package_files(relocated, expected, monkeypatch):
    top, bindir = relocated
    lib = Path(run([str(bindir / "pg_config"), "--pkglibdir"]).strip()) / "webhook_dedup.so"
    assert lib.is_relative_to(top), f"pg_config of the copy reports {lib}: PostgreSQL did not relocate"
    monkeypatch.setenv("WEBHOOK_DEDUP_PG_BIN", str(bindir))
    cluster = OwnCluster({})
    try:
        with cluster.connect() as conn:
            assert conn.execute("SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR'").fetchone()[0] \
                .startswith(str(top))
            conn.execute("CREATE EXTENSION webhook_dedup")
            assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'webhook_dedup'"
                                ).fetchone()[0] == expected.version
            claim = "SELECT outcome, claim_token FROM webhook_dedup.webhook_claim('github', webhook_dedup.webhook_key('github', 'd1'))"
            outcome, token = conn.execute(claim).fetchone()
            assert outcome == "claimed"
            assert conn.execute(claim).fetchone() == ("in_progress", None)
            assert conn.execute("SELECT webhook_dedup.webhook_complete('github', webhook_dedup.webhook_key('github', 'd1'), %s, '{\"ok\": 1}')",
                                (token,)).fetchone()[0] is True
            assert conn.execute("SELECT outcome, result FROM webhook_dedup.webhook_claim('github', webhook_dedup.webhook_key('github', 'd1'))"
                                ).fetchone() == ("duplicate", {"ok": 1})
            # the library the server mapped is the package's (preloaded at start)
            pid = int((cluster.data / "postmaster.pid").read_text().split()[0])
            maps = Path(f"/proc/{pid}/maps").read_text()
            assert f" {lib}\n" in maps
        wait_for("the maintenance worker's start in the server log",
                 lambda: "webhook_dedup maintenance worker started" in cluster.log_text(), 10)
    finally:
        cluster.destroy()
