"""pg_upgrade of a cluster that uses webhook_dedup, from one PostgreSQL
major to the next the test command runs (16 to 18, the PyPI builds of
scripts/lib.sh), as the README's "Upgrading PostgreSQL" says to do it:
the same webhook_dedup version installed for the new major first, the new
cluster made with initdb and the same settings (the library preloaded),
`pg_upgrade`, then the new server started. No `ALTER EXTENSION UPDATE`:
the extension's version does not change.

The old cluster holds keys in several states (completed with a result,
held by a lease, failed with a retry time), a source's settings, a stored
verification key and a login granted webhook_dedup_receiver; after the
upgrade each key answers a delivery as it did before, the receiver's grant
works, the stored key verifies, and the background worker runs on the
new server.

Needs WEBHOOK_DEDUP_OLD_PG_BIN and WEBHOOK_DEDUP_NEW_PG_BIN (bin
directories of two majors, each with this webhook_dedup installed) and
WEBHOOK_DEDUP_PG_OS_USER; scripts/test.sh sets them in its versions layer.
"""

import hashlib
import hmac
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
SECRET = "pg-upgrade-secret"


def env(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set (scripts/test.sh sets it)", pytrace=False)
    return value


class Cluster:
    """A data directory of one major's build, run as the PostgreSQL OS user,
    listening on a Unix socket in its own directory."""

    def __init__(self, top: Path, name: str, bin_dir: Path, user: str):
        self.bin, self.user = bin_dir, user
        self.dir = top / name
        self.dir.mkdir()
        shutil.chown(self.dir, user)
        self.data, self.log = self.dir / "data", self.dir / "server.log"

    def run(self, program, *args, cwd=None):
        done = subprocess.run(["runuser", "-u", self.user, "--", str(self.bin / program), *args],
                              capture_output=True, text=True, cwd=cwd)
        if done.returncode != 0:
            pytest.fail(f"{program} {' '.join(args)} exited with {done.returncode}:\n{done.stdout[-4000:]}\n"
                        f"{done.stderr[-4000:]}", pytrace=False)
        return done.stdout

    def initdb(self):
        # PostgreSQL 18's initdb turns data checksums on by default, and
        # pg_upgrade needs both clusters alike: off on both
        checksums = ["--no-data-checksums"] if self.version() >= 18 else []
        self.run("initdb", "-D", str(self.data), "--auth=trust", "--username=postgres", "--encoding=UTF8",
                 "--locale=C.UTF-8", *checksums)
        with open(self.data / "postgresql.conf", "a") as f:
            f.write(f"listen_addresses = ''\nunix_socket_directories = '{self.dir}'\nport = 5432\n"
                    "shared_preload_libraries = 'webhook_dedup'\n")

    def version(self) -> int:
        out = subprocess.run([str(self.bin / "pg_config"), "--version"], capture_output=True, text=True).stdout
        return int(out.split()[1].split(".")[0])

    def start(self):
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "start")

    def stop(self):
        self.run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def connect(self, user="postgres"):
        return psycopg.connect(host=str(self.dir), port=5432, user=user, dbname="postgres", autocommit=True)


def github_delivery(delivery_id: str) -> tuple:
    body = json.dumps({"action": "opened", "id": delivery_id}).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {"X-GitHub-Event": "issues", "X-GitHub-Delivery": delivery_id, "X-Hub-Signature-256": signature}
    return body, json.dumps(headers)


@pytest.fixture(scope="module")
def upgraded():
    old_bin, new_bin = Path(env("WEBHOOK_DEDUP_OLD_PG_BIN")), Path(env("WEBHOOK_DEDUP_NEW_PG_BIN"))
    user = env("WEBHOOK_DEDUP_PG_OS_USER")
    if os.geteuid() != 0:
        pytest.fail("run as root: the clusters run as another user", pytrace=False)
    top = Path(tempfile.mkdtemp(prefix="webhook_dedup_pg_upgrade."))
    top.chmod(0o755)
    old, new = Cluster(top, "old", old_bin, user), Cluster(top, "new", new_bin, user)
    assert old.version() < new.version(), (old.version(), new.version())
    try:
        old.initdb()
        old.start()
        with old.connect() as conn:
            conn.execute("CREATE EXTENSION webhook_dedup")
            conn.execute("CREATE ROLE receiver LOGIN")
            conn.execute("GRANT webhook_dedup_receiver TO receiver")
            conn.execute("INSERT INTO webhook_dedup.sources (source, retention) VALUES ('orders', '7 days')")
            conn.execute("SELECT webhook_dedup.add_secret('github', %s)", (SECRET,))
            token = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim('orders', 'done')"
                                 ).fetchone()[0]
            conn.execute("SELECT webhook_dedup.webhook_complete('orders', 'done', %s, '{\"order\": 7}')", (token,))
            conn.execute("SELECT webhook_dedup.webhook_claim('orders', 'held', lease => '1 hour')")
            token = conn.execute("SELECT claim_token FROM webhook_dedup.webhook_claim('orders', 'failed')"
                                 ).fetchone()[0]
            conn.execute("SELECT webhook_dedup.webhook_fail('orders', 'failed', %s, 'timeout', "
                         "retry_after => '1 hour')", (token,))
            body, headers = github_delivery("gh-1")
            outcome = conn.execute("SELECT outcome FROM webhook_dedup.webhook_receive('github', %s, %s::jsonb)",
                                   (body, headers)).fetchone()[0]
            assert outcome == "claimed"
            before = conn.execute("SELECT source, idem_key, state, attempt, result, deliveries"
                                  " FROM webhook_dedup.keys ORDER BY 1, 2").fetchall()
            extversion = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'webhook_dedup'"
                                      ).fetchone()[0]
        old.stop()
        new.initdb()
        # pg_upgrade writes its logs into its working directory
        new.run("pg_upgrade", "-b", str(old_bin), "-B", str(new_bin), "-d", str(old.data), "-D", str(new.data),
                "-s", str(new.dir), cwd=str(new.dir))
        new.start()
        yield new, before, extversion
    finally:
        for c in (old, new):
            if (c.data / "postmaster.pid").exists():
                subprocess.run(["runuser", "-u", user, "--", str(c.bin / "pg_ctl"), "-D", str(c.data), "-m",
                                "immediate", "-w", "stop"], capture_output=True)
        shutil.rmtree(top, ignore_errors=True)


def test_the_extension_and_every_key_are_carried_over(upgraded):
    new, before, extversion = upgraded
    with new.connect() as conn:
        assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'webhook_dedup'"
                            ).fetchone()[0] == extversion
        assert conn.execute("SELECT source, idem_key, state, attempt, result, deliveries"
                            " FROM webhook_dedup.keys ORDER BY 1, 2").fetchall() == before
        assert int(conn.execute("SHOW server_version_num").fetchone()[0]) // 10000 == new.version()


def test_each_key_answers_as_before(upgraded):
    new, _, _ = upgraded
    with new.connect(user="receiver") as conn:
        claim = "SELECT outcome, result FROM webhook_dedup.webhook_claim('orders', %s)"
        assert conn.execute(claim, ("done",)).fetchone() == ("duplicate", {"order": 7})
        assert conn.execute(claim, ("held",)).fetchone()[0] == "in_progress"
        assert conn.execute(claim, ("failed",)).fetchone()[0] == "retry_later"
        assert conn.execute(claim, ("new",)).fetchone()[0] == "claimed"
        # the verification key stored before the upgrade still verifies
        body, headers = github_delivery("gh-1")
        assert conn.execute("SELECT outcome FROM webhook_dedup.webhook_receive('github', %s, %s::jsonb)",
                            (body, headers)).fetchone()[0] == "in_progress"
        body, headers = github_delivery("gh-2")
        assert conn.execute("SELECT outcome FROM webhook_dedup.webhook_receive('github', %s, %s::jsonb)",
                            (body, headers)).fetchone()[0] == "claimed"


def test_the_worker_runs_on_the_new_server(upgraded):
    new, _, _ = upgraded
    with new.connect() as conn:
        deadline = time.monotonic() + 20
        while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'webhook_dedup maintenance'"
                           ).fetchone()[0] == 0:
            assert time.monotonic() < deadline, "no maintenance worker: " + new.log.read_text()[-3000:]
            time.sleep(0.2)
        conn.execute("SELECT * FROM webhook_dedup.run_maintenance()")
