"""Fixtures for the distributed layer: a Citus coordinator and two workers of
the tests' own, on loopback (citus_cluster.py).

scripts/test.sh runs this layer only when Citus is installed (it skips the
layer, saying so, when it cannot be); here nothing is skipped: a missing
WEBHOOK_DEDUP_PG_BIN or WEBHOOK_DEDUP_PG_OS_USER, a node that does not
start or an extension that does not propagate fails the tests with a
message.
"""

import pytest

from citus_cluster import CitusCluster

@pytest.fixture(scope="session")
def citus():
    """The running cluster: `coordinator`, `workers` (each with connect(),
    stop(mode), start(), log_text(), port), `connect()` to the coordinator.
    Destroyed (every node stopped with -m immediate, every directory
    removed) at the end of the session, whatever happened."""
    cluster = CitusCluster(workers=2)
    try:
        yield cluster.start()
    finally:
        cluster.destroy()
