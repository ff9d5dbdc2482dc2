"""What the package's tests share: a database of their own for the README's
programs (they use the source "github", whose keys live in the database),
an application login in it, the processes they serve on loopback, and
signed GitHub deliveries."""

import hashlib
import hmac
import http.client
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest

PACKAGE = Path(__file__).resolve().parent.parent        # clients/python
EXAMPLES = PACKAGE / "examples"
APPS = Path(__file__).resolve().parent / "apps"
REPO = PACKAGE.parent.parent
SESSION = uuid.uuid4().hex[:8]
GITHUB_SECRET = f"readme-secret-{SESSION}"


def conninfo(**kw) -> str:
    return psycopg.conninfo.make_conninfo("", **kw)


@pytest.fixture(scope="session")
def app_db():
    """A database with webhook_dedup of the README's programs' own, a login
    (webhook_dedup_receiver, INSERT and SELECT on `events`) and the key of
    the source "github"; the libpq variables that select them, as a dict."""
    missing = [v for v in ("PGHOST", "PGPORT", "PGUSER", "PGDATABASE") if not os.environ.get(v)]
    if missing:
        pytest.fail(f"these tests need {', '.join(missing)} (scripts/test.sh sets them)", pytrace=False)
    name, role = f"py_readme_{SESSION}", f"py_app_{SESSION}"
    with psycopg.connect(conninfo(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"GRANT webhook_dedup_receiver TO {role}")
        try:
            with psycopg.connect(conninfo(dbname=name), autocommit=True) as db:
                db.execute("CREATE EXTENSION webhook_dedup")
                db.execute("CREATE TABLE public.events (idem_key text PRIMARY KEY, action text)")
                db.execute(f"GRANT INSERT, SELECT ON public.events TO {role}")
                db.execute("SELECT webhook_dedup.add_secret('github', %s)", (GITHUB_SECRET,))
            yield {"PGHOST": os.environ["PGHOST"], "PGPORT": os.environ["PGPORT"], "PGUSER": role,
                   "PGDATABASE": name}
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.execute(f"DROP ROLE IF EXISTS {role}")


@pytest.fixture(scope="session")
def app_admin(app_db):
    """The superuser, autocommit, in the README's database."""
    with psycopg.connect(conninfo(dbname=app_db["PGDATABASE"]), autocommit=True) as conn:
        yield conn


def app_env(db: dict, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(db)
    env["PYTHONPATH"] = os.pathsep.join([str(EXAMPLES), str(APPS)])
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """A server process on a loopback port, its output in a log file."""

    def __init__(self, argv, env, port, log_path):
        self.port = port
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(argv, env=env, stdout=self.log, stderr=subprocess.STDOUT, cwd=str(APPS))
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, f"the server exited: {self.output()}"
            try:
                if self.request("GET", "/__counts")[0] == 200:
                    return
            except OSError:
                pass
            assert time.monotonic() < deadline, f"the server did not start: {self.output()}"
            time.sleep(0.1)

    def output(self) -> str:
        self.log.flush()
        return Path(self.log_path).read_text(errors="replace")

    def request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def counts(self) -> dict:
        status, _, body = self.request("GET", "/__counts")
        assert status == 200
        return json.loads(body)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def signed_github(delivery_id: str, body: bytes, secret: str = GITHUB_SECRET, event: str = "issues") -> dict:
    signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery_id, "X-Hub-Signature-256": signature,
            "Content-Type": "application/json"}


def read_response(sock: socket.socket) -> tuple:
    """One HTTP response read from a raw socket: (status, headers, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed before an answer: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        length = int(headers["content-length"])
        while len(rest) < length:
            chunk = sock.recv(65536)
            assert chunk, "the connection closed inside the answer's body"
            rest += chunk
        return status, headers, rest[:length]
    while True:  # chunked, or until the server closes
        if headers.get("transfer-encoding") == "chunked" and rest.endswith(b"0\r\n\r\n"):
            break
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    if headers.get("transfer-encoding") == "chunked":
        body, data = b"", rest
        while True:
            size_line, _, data = data.partition(b"\r\n")
            size = int(size_line, 16)
            if size == 0:
                break
            body, data = body + data[:size], data[size + 2:]
        rest = body
    return status, headers, rest


def send_partial(port: int, path: str, headers: dict, parts, chunked: bool) -> tuple:
    """Sends a request's head and then `parts` of its body (as chunks when
    `chunked`), never the rest (nor the last chunk), and keeps the connection
    open: the answer read back can only come from a server that refused the
    body without waiting for the rest. A server that waits for it never
    answers, and the read times out (30 s)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        for name, value in headers.items():
            head += f"{name}: {value}\r\n"
        if chunked:
            head += "Transfer-Encoding: chunked\r\n"
        sock.sendall(head.encode() + b"\r\n")
        for part in parts:
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part)
            except (BrokenPipeError, ConnectionResetError):
                break  # refused already: the answer is waiting
        return read_response(sock)
    finally:
        sock.close()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def python() -> str:
    return sys.executable


@pytest.fixture(scope="session")
def fastapi_server(app_db, tmp_path_factory):
    """examples/fastapi_app.py served by uvicorn on loopback (counted)."""
    port = free_port()
    server = Served([python(), "-m", "uvicorn", "counted_fastapi:app", "--host", "127.0.0.1", "--port", str(port),
                     "--no-access-log"], app_env(app_db), port, tmp_path_factory.mktemp("fastapi") / "log")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def django_server(app_db, tmp_path_factory):
    """examples/django_app.py served by gunicorn on loopback (counted; one
    worker process, so that one process counts)."""
    port = free_port()
    gunicorn = str(Path(python()).parent / "gunicorn")
    server = Served([gunicorn, "--bind", f"127.0.0.1:{port}", "--workers", "1", "counted_django:application"],
                    app_env(app_db, ALLOWED_HOSTS="127.0.0.1"), port,
                    tmp_path_factory.mktemp("django") / "log")
    yield server
    server.stop()
