"""A Citus cluster of the tests' own: a coordinator and two workers, each a
throwaway PostgreSQL cluster (tests/cluster/own_cluster.py's OwnCluster) in
its own temporary directory, run as WEBHOOK_DEDUP_PG_OS_USER with the
binaries in WEBHOOK_DEDUP_PG_BIN, with the Citus extension version
WEBHOOK_DEDUP_CITUS_EXTVERSION installed there (all three set by
scripts/test.sh: Citus 13.2-1 on PostgreSQL 15, 14.0-1 on 16 and 18,
scripts/lib.sh citus_extversion).

Citus nodes talk to each other over TCP, so each node also listens on
127.0.0.1 (only), on a free port picked when it starts; its Unix socket stays
in its own directory. Every node preloads `citus,webhook_dedup` (Citus must
come first) and trusts every local connection. The nodes are joined as
Citus's documentation does it: `CREATE EXTENSION citus` on every node, then
`citus_set_coordinator_host` and `citus_add_node` for each worker on the
coordinator; `CREATE EXTENSION webhook_dedup` on the coordinator then
propagates the extension to the workers, which is checked.
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

sys.path.append(str(Path(__file__).resolve().parents[1] / "cluster"))
from own_cluster import OwnCluster, wait_for  # noqa: E402,F401

LOOPBACK = "127.0.0.1"

# Every node's postgresql.conf, besides own_cluster's (socket directory, ...).
SETTINGS = {
    "listen_addresses": f"'{LOOPBACK}'",
    "shared_preload_libraries": "'citus,webhook_dedup'",
    # 32 client connections through the coordinator, each of which may hold
    # a connection to every worker, plus Citus's own between the nodes
    # (metadata sync, the maintenance daemon, 2PC recovery, shard moves) and
    # the tests' direct connections to the workers.
    "max_connections": "200",
    # The coordinator opens at most this many connections to one worker, so
    # the worker keeps slots for everything else.
    "citus.max_shared_pool_size": "150",
    # Citus's maintenance daemon and background task executors (shard moves),
    # webhook_dedup's maintenance worker, logical replication for moves.
    "max_worker_processes": "20",
    # citus_move_shard_placement copies a shard by logical replication (the
    # default transfer mode) while it keeps taking writes.
    "wal_level": "logical",
    # The backend type in every line: whose error it is (a client backend,
    # the webhook_dedup maintenance worker, the Citus maintenance daemon).
    "log_line_prefix": "'%m [%p] %b: '",
}

START_ATTEMPTS = 3


def free_port() -> int:
    """A TCP port on the loopback address nobody listens on right now (the
    kernel's pick; another process may still take it before the server
    binds it, so a start that finds it taken picks again)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


class CitusNode(OwnCluster):
    """One node: an OwnCluster listening on 127.0.0.1:`port` as well as on
    its Unix socket, with Citus preloaded. `connect()` goes through TCP, as
    the other nodes' connections do."""

    def __init__(self, name: str, settings: dict):
        self.name = name
        self.port = free_port()
        try:
            super().__init__({**SETTINGS, **settings, "port": str(self.port)}, prefix="webhook_dedup_citus.")
        except BaseException:
            # The constructor created a directory (and maybe a running
            # server) nobody else knows of yet.
            if hasattr(self, "dir"):
                self.destroy()
            raise

    def start(self):
        """pg_ctl start; when the port was taken meanwhile, start again on a
        new one (the last `port` line of postgresql.conf wins)."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                return super().start()
            except subprocess.CalledProcessError as e:
                log = self.log_text() if self.log.exists() else ""
                if "could not bind" in log and attempt < START_ATTEMPTS:
                    self.log.unlink()
                    self.port = free_port()
                    with open(self.data / "postgresql.conf", "a") as f:
                        f.write(f"port = {self.port}\n")
                    continue
                stderr = (e.stderr or b"").decode(errors="replace")
                pytest.fail(f"the Citus {self.name} did not start: {stderr}\n{log[-3000:]}", pytrace=False)

    def connect(self, dbname="postgres", autocommit=True, user="postgres") -> psycopg.Connection:
        return psycopg.connect(host=LOOPBACK, port=self.port, user=user, dbname=dbname, autocommit=autocommit)

    def __repr__(self):
        return f"<Citus {self.name} {LOOPBACK}:{self.port} {self.dir}>"


class CitusCluster:
    """A coordinator and `workers` workers. Build it with `start()` inside a
    try whose finally calls `destroy()`: a node that started is destroyed
    even when a later step fails."""

    def __init__(self, workers: int = 2, settings: dict | None = None):
        missing = [n for n in ("WEBHOOK_DEDUP_PG_BIN", "WEBHOOK_DEDUP_PG_OS_USER", "WEBHOOK_DEDUP_CITUS_EXTVERSION")
                   if not os.environ.get(n)]
        if missing:
            pytest.fail(f"the distributed tests need {', '.join(missing)} (scripts/test.sh sets them)", pytrace=False)
        self.citus_extversion = os.environ["WEBHOOK_DEDUP_CITUS_EXTVERSION"]
        self.worker_count = workers
        self.settings = settings or {}
        self.coordinator: CitusNode | None = None
        self.workers: list[CitusNode] = []

    @property
    def nodes(self) -> list[CitusNode]:
        return ([self.coordinator] if self.coordinator else []) + self.workers

    def alter_system(self, clause: str) -> None:
        """`ALTER SYSTEM <clause>` on every node, then a reload (sessions
        take it at their next command; background processes at their next
        look at the settings)."""
        for node in self.nodes:
            with node.connect() as conn:
                conn.execute(f"ALTER SYSTEM {clause}")
                conn.execute("SELECT pg_reload_conf()")

    def connect(self, dbname="postgres", autocommit=True, user="postgres") -> psycopg.Connection:
        """A new connection to the coordinator, where receivers connect."""
        return self.coordinator.connect(dbname, autocommit, user)

    def start(self):
        self.coordinator = CitusNode("coordinator", self.settings)
        for i in range(1, self.worker_count + 1):
            self.workers.append(CitusNode(f"worker {i}", self.settings))
        for node in self.nodes:
            with node.connect() as conn:
                conn.execute("CREATE EXTENSION citus")
                version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'").fetchone()[0]
                if version != self.citus_extversion:
                    pytest.fail(f"the {node.name} has Citus {version}, not {self.citus_extversion}", pytrace=False)
        with self.connect() as conn:
            conn.execute("SELECT citus_set_coordinator_host(%s, %s)", (LOOPBACK, self.coordinator.port))
            for worker in self.workers:
                conn.execute("SELECT citus_add_node(%s, %s)", (LOOPBACK, worker.port))
            conn.execute("CREATE EXTENSION webhook_dedup")
            version = self.extension_version(conn)
        for worker in self.workers:
            with worker.connect() as conn:
                there = self.extension_version(conn)
            if there != version:
                pytest.fail(f"CREATE EXTENSION webhook_dedup on the coordinator did not propagate to the {worker.name}"
                            f" ({worker!r}): it has {there or 'no webhook_dedup'}, the coordinator {version}",
                            pytrace=False)
        return self

    @staticmethod
    def extension_version(conn) -> str | None:
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'webhook_dedup'").fetchone()
        return row and row[0]

    def worker_at(self, port: int) -> CitusNode:
        return next(w for w in self.workers if w.port == port)

    def logs(self) -> str:
        """Every node's server log, each under its name (for failure messages)."""
        return "\n".join(f"--- {n.name} ({n.log}) ---\n{n.log_text()}" for n in self.nodes if n.log.exists())

    def destroy(self):
        for node in self.nodes:
            node.destroy()
