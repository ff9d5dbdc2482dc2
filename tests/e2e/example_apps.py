"""The example receivers of examples/README.md as processes the tests start, crash and restart.

Every app follows the contract in examples/README.md: it listens on
127.0.0.1:$PORT, answers GET /healthz once ready, receives
POST /webhooks/{github,stripe,standard}, logs in as the role given by the
libpq variables, (its worker) drains webhook_next, and (its sender) delivers
the job's outbox intents to NOTIFY_URL. The tests pick the
port, so no app needs to report one.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from support import REPO

EXAMPLES = REPO / "examples"
STARTUP_TIMEOUT_S = 30


@dataclass(frozen=True)
class App:
    """How to start one stack's receiver, worker and outbox sender (each run from `folder`)."""
    name: str
    folder: Path
    receiver: tuple
    worker: tuple
    sender: tuple
    needs: tuple  # executables that must be on PATH

    def missing(self) -> list:
        return [exe for exe in self.needs if shutil.which(exe) is None]


# sys.executable: the test virtualenv, into which scripts/lib.sh installs
# examples/fastapi/requirements.txt.
APPS = {
    "fastapi": App("fastapi", EXAMPLES / "fastapi", (sys.executable, "app.py"), (sys.executable, "worker.py"),
                   (sys.executable, "sender.py"), ()),
    # Django (sync psycopg through the Python client package) with the
    # FastAPI example's worker and sender, which no web framework shapes
    "django": App("django", EXAMPLES / "django", (sys.executable, "serve.py"),
                  (sys.executable, "../fastapi/worker.py"), (sys.executable, "../fastapi/sender.py"), ()),
    "express": App("express", EXAMPLES / "express", ("node", "server.js"), ("node", "worker.js"),
                   ("node", "sender.js"), ("node",)),
    # Hono (the Fetch API) with the Express example's job, worker and sender
    "hono": App("hono", EXAMPLES / "hono", ("node", "server.js"), ("node", "../express/worker.js"),
                ("node", "../express/sender.js"), ("node",)),
    # a Next.js route handler (built by scripts/lib.sh with next build),
    # again with the Express example's job, worker and sender
    "nextjs": App("nextjs", EXAMPLES / "nextjs", ("node", "serve.js"), ("node", "../express/worker.js"),
                  ("node", "../express/sender.js"), ("node",)),
    "sinatra": App("sinatra", EXAMPLES / "sinatra", ("ruby", "app.rb"), ("ruby", "worker.rb"),
                   ("ruby", "sender.rb"), ("ruby",)),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Process:
    """One receiver or worker process of an app, with its output in a log file."""

    def __init__(self, argv: tuple, folder: Path, env: dict, log: Path):
        self.argv, self.folder, self.env, self.log = argv, folder, env, log
        self.proc = None

    def start(self) -> "Process":
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.argv, cwd=self.folder, env=self.env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def exited(self, timeout: float = 0) -> bool:
        """True once the process has exited (waiting up to `timeout` seconds for it)."""
        try:
            self.proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop(self) -> None:
        """SIGTERM (a clean stop), SIGKILL after 10 s; the whole process group."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        if not self.exited(10):
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def output(self) -> str:
        return self.log.read_text(errors="replace")


class Receiver(Process):
    """An app's HTTP receiver on a port of its own."""

    def __init__(self, app: App, env: dict, log: Path):
        self.port = free_port()
        super().__init__(app.receiver, app.folder, {**env, "PORT": str(self.port)}, log)
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> "Receiver":
        super().start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.argv} did not answer GET /healthz within {STARTUP_TIMEOUT_S} s "
                           f"(exit code {self.proc.returncode}); its output:\n{self.output()}")

    def restart_after_crash(self) -> None:
        """Wait for the crashed process to be gone, then start a new one on the same port."""
        assert self.exited(10), f"{self.argv} should have died; its output:\n{self.output()}"
        self.start()
