"""The flat apt repository scripts/package.sh --repo writes: its indexes
agree with the packages it holds, and apt-get installs the package of
Debian's PostgreSQL from it through a `file:` source, as a DBA's machine
would from a copy of it.

The repository is $WEBHOOK_DEDUP_APT_REPO (scripts/test.sh builds it);
apt-get runs with a source list, list directory and cache of this test's
own (`-o Dir::Etc::SourceList=...`), so the machine's sources and lists are
neither read nor changed. The install changes the machine as
test_package.py's does, so it runs as root in the package layer, and
removes the package again.
"""

import gzip
import hashlib
import os
import re
import subprocess
from pathlib import Path

import pytest
from own_cluster import OwnCluster

from pkgsupport import run

APT_ENV = dict(os.environ, DEBIAN_FRONTEND="noninteractive")


@pytest.fixture(scope="module")
def repo() -> Path:
    given = os.environ.get("WEBHOOK_DEDUP_APT_REPO")
    if not given or not Path(given, "Release").is_file():
        pytest.fail("WEBHOOK_DEDUP_APT_REPO must name a repository scripts/package.sh --repo wrote "
                    "(scripts/test.sh sets it)", pytrace=False)
    return Path(given)


def stanzas(text: str) -> list:
    """The paragraphs of a Debian control file (Packages, Release) as dicts;
    a field's continuation lines are kept, joined by newlines."""
    out = []
    for block in re.split(r"\n\s*\n", text.strip()):
        fields, name = {}, None
        for line in block.splitlines():
            if line.startswith(" ") and name:
                fields[name] += "\n" + line.strip()
            else:
                name, _, value = line.partition(":")
                fields[name] = value.strip()
        out.append(fields)
    return out


def test_release_lists_the_indexes_with_their_hashes(repo):
    (release,) = stanzas((repo / "Release").read_text())
    assert release["Origin"] == "webhook_dedup"
    for field, algorithm in (("MD5Sum", hashlib.md5), ("SHA256", hashlib.sha256)):
        listed = {}
        for line in release[field].splitlines():
            if line:
                digest, size, name = line.split()
                listed[name] = (digest, int(size))
        assert set(listed) == {"Packages", "Packages.gz"}, release[field]
        for name, (digest, size) in listed.items():
            data = (repo / name).read_bytes()
            assert (algorithm(data).hexdigest(), len(data)) == (digest, size), name
    assert gzip.decompress((repo / "Packages.gz").read_bytes()) == (repo / "Packages").read_bytes()


def test_packages_lists_every_deb_with_its_hash(repo):
    packages = stanzas((repo / "Packages").read_text())
    debs = sorted(p.name for p in repo.glob("*.deb"))
    assert sorted(Path(p["Filename"]).name for p in packages) == debs
    majors = []
    for p in packages:
        deb = repo / p["Filename"]
        assert hashlib.sha256(deb.read_bytes()).hexdigest() == p["SHA256"]
        assert int(p["Size"]) == deb.stat().st_size
        for field in ("Package", "Version", "Architecture", "Depends"):
            assert p[field] == run(["dpkg-deb", "--field", str(deb), field]).strip(), field
        major = re.fullmatch(r"postgresql-(\d+)-webhook-dedup", p["Package"]).group(1)
        assert p["Depends"].startswith(f"postgresql-{major},")
        majors.append(major)
    (release,) = stanzas((repo / "Release").read_text())
    assert release["Description"] == "webhook_dedup for PostgreSQL " + " ".join(sorted(majors, key=int))


def apt(tmp: Path, *args: str, program: str = "apt-get") -> str:
    """apt-get (or apt-cache) with this test's own sources, lists and cache."""
    opts = [f"-o=Dir::Etc::SourceList={tmp / 'sources.list'}", f"-o=Dir::Etc::SourceParts={tmp / 'parts'}",
            f"-o=Dir::State::Lists={tmp / 'lists'}", f"-o=Dir::Cache={tmp / 'cache'}",
            "-o=DPkg::Lock::Timeout=120"]
    return run([program, *opts, *args], env=APT_ENV)


def test_apt_get_installs_from_a_file_source(repo, expected, tmp_path):
    if os.geteuid() != 0:
        pytest.fail("installing a package needs root", pytrace=False)
    if subprocess.run(["dpkg-query", "-W", "-f=${Status}", expected.name], capture_output=True,
                      text=True).stdout == "install ok installed":
        pytest.fail(f"{expected.name} is already installed; this test installs and removes it", pytrace=False)
    for d in ("parts", "lists/partial", "cache/archives/partial"):
        (tmp_path / d).mkdir(parents=True)
    # the source line the README gives
    (tmp_path / "sources.list").write_text(f"deb [trusted=yes] file:{repo.resolve()} ./\n")
    apt(tmp_path, "update")
    policy = apt(tmp_path, "policy", expected.name, program="apt-cache")
    assert f"Candidate: {expected.version}" in policy, policy
    try:
        apt(tmp_path, "install", "-y", "--no-install-recommends", expected.name)
        status = run(["dpkg", "-s", expected.name]).splitlines()
        assert "Status: install ok installed" in status and f"Version: {expected.version}" in status
        cluster = OwnCluster({})  # preloads the library apt-get installed
        try:
            with cluster.connect() as conn:
                conn.execute("CREATE EXTENSION webhook_dedup")
                assert conn.execute("SELECT outcome FROM webhook_dedup.webhook_claim('apt', 'k1')"
                                    ).fetchone()[0] == "claimed"
        finally:
            cluster.destroy()
    finally:
        apt(tmp_path, "remove", "-y", expected.name)
    assert subprocess.run(["dpkg-query", "-W", "-f=${Status}", expected.name], capture_output=True,
                          text=True).stdout != "install ok installed"
