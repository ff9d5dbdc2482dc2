"""A worker backend must not grow with every claim, delegated by the
coordinator or made by a client connected to the worker that holds the
source (both write the source's shard directly, src/store/local_shard.rs;
each decline runs the SQL, as before).

Citus 13.2.1 and later 13.2.x keep a local plan per execution of a kept
(generic) plan of a fast-path statement or a parameterised INSERT on a
Citus table, in the cached plan's memory context, never freed
(citusdata/citus#8783; fixed by #8824 in 13.5.0): the worker backend
serving the coordinator's connection grew by about 85 KB per delegated
webhook_claim (57 MB to 473 MB RSS over 5,000 claims, measured on 0.2.0 as
first landed). The extension now prepares its statements for custom plans
on such a Citus (src/spi.rs, src/store/citus.rs), so nothing accumulates.

The tests: 1,000 claims to warm the caches (relation, catalog and plan
caches, Citus's metadata cache, the extension's own caches), then 20,000
more through the same connection: through the coordinator, all delegated
to the worker that holds the source; and with the client connected to that
worker. Every backend that served them may grow its own memory (RssAnon of
/proc/PID/status: the anonymous pages where its memory contexts live) by at
most 1 MB over the 20,000 claims: the coordinator's backend of the client
and the worker's backend of Citus's connection on the delegated route, the
owner's backend of the client on the other. One earlier probe measured 377
bytes per claim (7.5 MB over 20,000) on one backend while another found
every one flat: 1 MB (52 bytes per claim) tells the two apart, where the
earlier 4 MB, over the worker's backend only, did not look at the
coordinator's at all. VmRSS also counts the shared buffers a backend
touches, which grow as the claims fill new pages (about 8 MB here) and are
no leak; the leak of #8783 was private: 23 MB to 437 MB of private dirty
memory over 5,000 claims. Measured after the fix: RssAnon 6,936 kB before
and after (0 bytes per claim); with the fast path, 0.0 to 0.1 MB over
20,000 (make bench, docs/distributed.md).
"""

import re

from test_distributed import distributed, one, placement_port  # noqa: F401 (fixture)

WARM_UP = 1_000
CLAIMS = 20_000
BOUND_KB = 1024
SOURCE = "mem-src"


def memory_kb(pid: int) -> dict:
    """VmRSS and its parts (/proc/PID/status, kB): RssAnon is the
    backend's own memory (palloc'd contexts live there); RssShmem is the
    shared memory it has touched (shared buffers: it grows as the claims
    fill new pages, and is no leak)."""
    with open(f"/proc/{pid}/status") as f:
        text = f.read()
    return {name: int(re.search(rf"^{name}:\s+(\d+) kB", text, re.M).group(1))
            for name in ("VmRSS", "RssAnon", "RssShmem")}


def claim_batch(conn, first: int, count: int):
    """`count` delegated claims through one connection, each a statement of
    its own in autocommit (outside a transaction block, which Citus needs
    to delegate the call to the worker)."""
    for i in range(first, first + count):
        conn.execute("SELECT outcome FROM webhook_dedup.webhook_claim(%s, %s)", (SOURCE, f"k-{i}"))


def serving_backend(worker) -> int:
    """The pid of the worker backend that ran the last delegated claim: of
    the worker's Citus internal connections (application_name
    citus_internal ...) whose last statement was a webhook_claim, the one
    that ran it last."""
    with worker.connect() as conn:
        row = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'citus_internal%%'"
            "   AND query LIKE '%%webhook_claim%%' ORDER BY query_start DESC LIMIT 1").fetchone()
    assert row, "no Citus connection on the worker ran webhook_claim: the claims were not delegated"
    return row[0]


def grown(before: dict, after: dict) -> int:
    return after["RssAnon"] - before["RssAnon"]


def report(name: str, pid: int, before: dict, after: dict) -> str:
    return (f"{name} backend {pid} over {CLAIMS} claims: " + ", ".join(
        f"{k} {before[k]} -> {after[k]} kB" for k in before)
        + f" ({grown(before, after) * 1024 / CLAIMS:.0f} bytes of RssAnon per claim)")


def test_delegated_claims_do_not_grow_the_serving_backends(distributed):  # noqa: F811
    with distributed.connect() as conn:
        worker = distributed.worker_at(placement_port(conn, "keys", SOURCE))
        coordinator_pid = one(conn, "SELECT pg_backend_pid()")
        claim_batch(conn, 0, WARM_UP)
        pid = serving_backend(worker)
        before = {"coordinator": memory_kb(coordinator_pid), "worker": memory_kb(pid)}
        claim_batch(conn, WARM_UP, CLAIMS)
        assert serving_backend(worker) == pid, "the coordinator kept its connection to the worker"
        after = {"coordinator": memory_kb(coordinator_pid), "worker": memory_kb(pid)}
        claimed = one(conn, "SELECT count(*) FROM webhook_dedup.keys WHERE source = %s", (SOURCE,))
    assert claimed == WARM_UP + CLAIMS
    pids = {"coordinator": coordinator_pid, "worker": pid}
    for name in pids:
        print(report(name, pids[name], before[name], after[name]))
    grew = {name: grown(before[name], after[name]) for name in pids}
    assert all(kb < BOUND_KB for kb in grew.values()), (
        f"a serving backend grew over {CLAIMS} delegated claims (kB): {grew}; the bound is {BOUND_KB} kB each")


def test_claims_of_a_client_on_the_owner_do_not_grow_its_backend(distributed):  # noqa: F811
    source = SOURCE + "-owner"
    with distributed.connect() as conn:
        worker = distributed.worker_at(placement_port(conn, "keys", source))
    with worker.connect() as conn:
        pid = one(conn, "SELECT pg_backend_pid()")
        for i in range(WARM_UP):
            conn.execute("SELECT outcome FROM webhook_dedup.webhook_claim(%s, %s)", (source, f"k-{i}"))
        before = memory_kb(pid)
        for i in range(WARM_UP, WARM_UP + CLAIMS):
            conn.execute("SELECT outcome FROM webhook_dedup.webhook_claim(%s, %s)", (source, f"k-{i}"))
        after = memory_kb(pid)
    with distributed.connect() as conn:
        claimed = one(conn, "SELECT count(*) FROM webhook_dedup.keys WHERE source = %s", (source,))
    assert claimed == WARM_UP + CLAIMS
    grew = grown(before, after)
    print(report("owner", pid, before, after))
    assert grew < BOUND_KB, (f"the owner's backend grew by {grew} kB over {CLAIMS} claims of its client "
                             f"({grew * 1024 / CLAIMS:.0f} bytes per claim; the bound is {BOUND_KB} kB)")
