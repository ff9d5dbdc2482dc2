"""Every code block of clients/python/README.md is a file of examples/
(byte for byte, or a contiguous excerpt of the file it names), and each of
those files runs here against the cluster: the install line in a fresh
virtualenv, offline; the FastAPI receiver under uvicorn and the Django one
under gunicorn, sent real signed GitHub deliveries and their duplicates;
the worker as a process. (The outbox's sender: test_outbox_sender.py.)"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from webhook_dedup import sync

from conftest import EXAMPLES, PACKAGE, REPO, SESSION, app_env, conninfo, python, signed_github

README = PACKAGE / "README.md"
BLOCK = re.compile(r"(?:<!-- (file|excerpt): (\S+) -->\n)?```[a-z]*\n(.*?)```\n", re.S)


def blocks():
    return [(m.group(1), m.group(2), m.group(3)) for m in BLOCK.finditer(README.read_text())]


def test_every_block_of_the_readme_is_a_file_of_examples():
    found = blocks()
    assert len(found) == README.read_text().count("```") // 2 and len(found) >= 5
    named = set()
    for kind, name, text in found:
        assert kind, f"a block of the README names no file: {text[:80]!r}"
        content = (PACKAGE / name).read_text()
        if kind == "file":
            assert text == content, f"the README's block differs from {name}"
        else:
            assert text in content, f"the README's block is not an excerpt of {name}"
        named.add((PACKAGE / name).resolve())
    assert {p.resolve() for p in EXAMPLES.iterdir() if p.is_file()} == named  # and no file left out


def tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")
            if "__pycache__" not in p.parts and ".pytest_cache" not in p.parts}


def test_the_install_line_installs_the_package_and_psycopg_pool_offline_without_writing_into_the_checkout(
        app_db, tmp_path):
    wheelhouse = Path(sys.prefix) / "wheelhouse"
    if not (wheelhouse / "flit_core-4.2.0-py3-none-any.whl").exists():
        pytest.fail(f"no {wheelhouse} with clients/python/requirements-wheelhouse.txt: scripts/lib.sh's "
                    "ensure_venv downloads it", pytrace=False)
    venv = tmp_path / "venv"
    subprocess.run([python(), "-m", "venv", str(venv)], check=True)
    before = tree(PACKAGE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", VIRTUAL_ENV=str(venv), PIP_NO_INDEX="1",
               PIP_FIND_LINKS=str(wheelhouse), PIP_DISABLE_PIP_VERSION_CHECK="1")
    done = subprocess.run(["bash", str(EXAMPLES / "install.sh")], cwd=str(REPO), env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert tree(PACKAGE) == before                      # no build/, no egg-info: nothing written into the checkout
    probe = ("import json, sys, psycopg, psycopg_pool, webhook_dedup\n"
             "from webhook_dedup import sync\n"
             "with psycopg.connect('', autocommit=True) as conn:\n"
             "    answer = sync.prepare_receiver(conn)\n"
             "print(json.dumps([webhook_dedup.__file__.startswith(sys.prefix), answer.status]))\n")
    ran = subprocess.run([str(venv / "bin" / "python"), "-c", probe], env=app_env(app_db), capture_output=True,
                         text=True, cwd=str(tmp_path))
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == [True, 500]         # installed in the new virtualenv, and it works


@pytest.fixture(params=["fastapi", "django"])
def receiver(request):
    return request.param, request.getfixturevalue(f"{request.param}_server")


def test_the_receiver_processes_a_signed_delivery_once_and_answers_its_duplicate(receiver, app_admin):
    name, server = receiver
    delivery = f"{name}-{SESSION}-{uuid.uuid4().hex[:6]}"
    body = json.dumps({"action": "opened", "delivery": delivery}).encode()
    first = server.request("POST", "/webhooks/github", body, signed_github(delivery, body))
    assert (first[0], first[1]["content-type"], first[1]["x-webhook-outcome"], json.loads(first[2])) == \
        (200, "application/json", "claimed", {"status": "processed"}), server.output()
    copy = server.request("POST", "/webhooks/github", body, signed_github(delivery, body))
    assert (copy[0], copy[1]["x-webhook-outcome"], copy[2]) == (200, "duplicate", first[2])
    assert app_admin.execute("SELECT count(*) FROM events WHERE idem_key = %s",
                             (f"github:{delivery}",)).fetchone()[0] == 1
    forged = server.request("POST", "/webhooks/github", body, signed_github(delivery + "-f", body, "not the key"))
    assert forged[0] == 401 and "x-webhook-outcome" not in forged[1]


def test_the_receiver_answers_the_error_answer_read_at_start_up_when_the_database_fails(receiver, app_db,
                                                                                         app_admin):
    name, server = receiver
    role = app_db["PGUSER"]
    with psycopg.connect(conninfo(), autocommit=True) as admin:
        admin.execute(f"ALTER ROLE {role} NOLOGIN")
        try:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
            body = b'{"action": "opened"}'
            status, headers, answer = server.request("POST", "/webhooks/github", body,
                                                     signed_github(f"down-{name}-{SESSION}", body))
            assert (status, headers["content-type"], json.loads(answer)) == \
                (500, "application/json", {"error": "internal error"})
        finally:
            admin.execute(f"ALTER ROLE {role} LOGIN")


def test_the_worker_processes_the_queue_and_stops_on_sigterm(app_db, app_admin, tmp_path):
    keys = []
    with ConnectionPool(conninfo(**{"user": app_db["PGUSER"], "dbname": app_db["PGDATABASE"]}), min_size=1,
                        kwargs={"autocommit": True}, open=True) as pool, pool.connection() as conn:
        for i in range(3):
            delivery = f"queued-{SESSION}-{i}"
            body = json.dumps({"action": f"labeled-{i}"}).encode()
            queued = sync.receive(conn, "github", body, signed_github(delivery, body), mode="enqueue")
            assert queued.outcome == "accepted"
            keys.append(queued.idem_key)
    log = open(tmp_path / "worker.log", "wb")
    worker = subprocess.Popen([python(), str(EXAMPLES / "worker.py")], env=app_env(app_db), stdout=log,
                              stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while app_admin.execute("SELECT count(*) FROM webhook_dedup.keys WHERE source = 'github'"
                                " AND idem_key = ANY(%s) AND state = 'completed'", (keys,)).fetchone()[0] < 3:
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()
            assert time.monotonic() < deadline, "the worker did not process the queue"
            time.sleep(0.05)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(20) == 0                      # stopped, not killed
    finally:
        if worker.poll() is None:
            worker.kill()
        log.close()
    assert app_admin.execute("SELECT idem_key, action FROM events WHERE idem_key = ANY(%s) ORDER BY 1",
                             (keys,)).fetchall() == [(k, f"labeled-{i}") for i, k in enumerate(keys)]
