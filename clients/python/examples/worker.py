"""The queue's worker: `receive(..., mode="enqueue")` stored the verified
deliveries; this process does their work. python worker.py; SIGTERM stops it
after the deliveries it holds."""
import json
import signal

from psycopg_pool import ConnectionPool
from webhook_dedup import sync


def job(conn, delivery):
    # your work, in the claim's transaction; delivery.payload: the raw body
    event = json.loads(delivery.payload)
    conn.execute("INSERT INTO events (idem_key, action) VALUES (%s, %s)", (delivery.idem_key, event.get("action")))
    return {"status": "processed"}


def handle(delivery):
    done = sync.with_claim(pool, delivery, job)    # a job that raises: webhook_fail, retried after a backoff
    if done.status == "failed":
        print(f"{delivery.idem_key} attempt {delivery.attempt}: {done.error} ({done.state})", flush=True)


with ConnectionPool("", kwargs={"autocommit": True}, open=True) as pool:   # libpq's PG* variables
    # each key leased for a minute (the job must end within it), ten at a time
    worker = sync.Worker(pool, handle, source="github", lease="1 minute", batch=10)
    signal.signal(signal.SIGTERM, lambda *_: worker.stop())
    worker.run()
