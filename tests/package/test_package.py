"""The Debian package installed as a DBA installs it: `apt-get install -y
./<deb>`, dpkg reports it installed, a cluster preloads the installed
library, creates the extension and claims, and `apt-get remove` takes every
file away again.

It changes the machine: it installs into /usr/lib/postgresql and
/usr/share/postgresql, replacing a webhook_dedup installed there by
`cargo pgrx install`, and the removal deletes those files. So it runs as
root, when no server of this machine uses webhook_dedup; afterwards install
the development build again. scripts/test.sh runs it in its last layer,
after its clusters stopped, and then calls install_extension. By hand
(as root, from the repository):

    ./scripts/package.sh
    WEBHOOK_DEDUP_DEB=$PWD/target/package/postgresql-15-webhook-dedup_<version>_amd64.deb \\
    WEBHOOK_DEDUP_PG_BIN=/usr/lib/postgresql/15/bin WEBHOOK_DEDUP_PG_OS_USER=postgres \\
        .venv/bin/python -m pytest -p no:cacheprovider -v tests/package/test_package.py
    bash -c 'source scripts/lib.sh && install_extension'

The tests run in the order written: the last one removes the package. If
one fails earlier, the fixture removes the package at the end all the same.
"""

import os
import subprocess
from pathlib import Path

import pytest
from own_cluster import OwnCluster, wait_for

from pkgsupport import expected_files, pg_config, run, without_third_party

APT_ENV = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
# apt-get waits up to 2 minutes for another apt or dpkg to finish
APT_GET = ["apt-get", "-o", "DPkg::Lock::Timeout=120"]


def dpkg_status(name: str):
    """dpkg's Status line of the package, or None when dpkg does not know it."""
    done = subprocess.run(["dpkg-query", "-W", "-f=${Status}", name], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def is_installed(name: str) -> bool:
    return dpkg_status(name) == "install ok installed"


@pytest.fixture(scope="module")
def installed(deb, expected):
    """Installs the .deb with apt-get; yields the regular files dpkg lists for it
    (read before any test removes it). Removes the package at the end if a
    test did not."""
    if os.geteuid() != 0:
        pytest.fail("installing a package needs root", pytrace=False)
    if is_installed(expected.name):
        pytest.fail(f"{expected.name} is already installed; this test installs and removes it. "
                    f"Remove it first: apt-get remove {expected.name}", pytrace=False)
    run([*APT_GET, "install", "-y", "--no-install-recommends", str(deb)], env=APT_ENV)
    try:
        listed = run(["dpkg", "-L", expected.name]).splitlines()
        yield [p for p in listed if Path(p).is_file() and not Path(p).is_symlink()]
    finally:
        if is_installed(expected.name):
            subprocess.run([*APT_GET, "remove", "-y", expected.name], env=APT_ENV, capture_output=True)


def test_dpkg_reports_it_installed(installed, expected):
    status = run(["dpkg", "-s", expected.name])
    assert "Status: install ok installed" in status.splitlines()
    assert f"Version: {expected.version}" in status.splitlines()
    # every file as the package shipped it (dpkg compares them with DEBIAN/md5sums)
    assert run(["dpkg", "--verify", expected.name]) == ""


def test_its_files_are_in_place(installed, expected):
    assert without_third_party(installed, expected) == expected_files(expected)
    assert len(installed) - len(expected_files(expected)) > 50, "the crates' licence files"
    control = Path(pg_config("--sharedir")) / "extension" / "webhook_dedup.control"
    assert f"default_version = '{expected.version}'" in control.read_text().splitlines()


def test_a_cluster_claims_with_it(installed, expected):
    cluster = OwnCluster({})  # preloads webhook_dedup: the installed library
    try:
        with cluster.connect() as conn:
            conn.execute("CREATE EXTENSION webhook_dedup")
            assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'webhook_dedup'"
                                ).fetchone()[0] == expected.version
            claim = "SELECT outcome, claim_token FROM webhook_dedup.webhook_claim('github', webhook_dedup.webhook_key('github', 'd1'))"
            outcome, token = conn.execute(claim).fetchone()
            assert outcome == "claimed" and token is not None
            assert conn.execute(claim).fetchone() == ("in_progress", None)
            assert conn.execute("SELECT webhook_dedup.webhook_complete('github', webhook_dedup.webhook_key('github', 'd1'), %s, "
                                "'{\"status\": 200}')", (token,)).fetchone()[0] is True
            assert conn.execute("SELECT outcome, result FROM webhook_dedup.webhook_claim('github', webhook_dedup.webhook_key('github', 'd1'))"
                                ).fetchone() == ("duplicate", {"status": 200})
            # the upgrade script came with it
            assert conn.execute("SELECT count(*) FROM pg_extension_update_paths('webhook_dedup') "
                                "WHERE source = '0.1.0' AND target = %s AND path IS NOT NULL",
                                (expected.version,)).fetchone()[0] == 1
        wait_for("the maintenance worker's start in the server log",
                 lambda: "webhook_dedup maintenance worker started" in cluster.log_text(), 10)
    finally:
        cluster.destroy()


def test_remove_takes_its_files_away(installed, expected):
    assert installed, "dpkg listed no files"
    run([*APT_GET, "remove", "-y", expected.name], env=APT_ENV)
    assert not is_installed(expected.name), dpkg_status(expected.name)
    left = [p for p in installed if os.path.lexists(p)]
    assert not left, f"files left after apt-get remove: {left}"
    assert not Path(f"/usr/share/doc/{expected.name}").exists()
