"""The outbox: a job writes its downstream call (an intent) with its business
write; this sender makes the call with the intent's downstream key.
NOTIFY_URL=https://... python outbox.py; SIGTERM stops it after the intent in hand."""
import json
import os
import signal
import urllib.error
import urllib.request

from psycopg_pool import ConnectionPool
from webhook_dedup import SendError, sync

TARGET = "notifications"


def job(conn, claim):
    # with_claim(pool, delivery, job): first the intent (LeaseLost when the
    # claim token no longer holds the key: rolled back, status lease_lost) ...
    sync.outbox_put(conn, claim, "notify", TARGET, {"event": claim.idem_key})
    # ... then the business write, in the same transaction
    conn.execute("INSERT INTO events (idem_key) VALUES (%s)", (claim.idem_key,))
    return {"status": "processed"}


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a 3xx is an answer (HTTPError), not a GET to send instead


OPENER = urllib.request.build_opener(NoRedirects)


def send(intent):
    request = urllib.request.Request(os.environ["NOTIFY_URL"], data=json.dumps(intent.request).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Idempotency-Key": intent.downstream_key})
    try:
        with OPENER.open(request, timeout=10) as answer:    # well within the lease
            data = answer.read()
    except urllib.error.HTTPError as error:                 # 429, 5xx: retried; another 4xx: a dead letter
        retry_after = error.headers.get("Retry-After", "")
        raise SendError(f"HTTP {error.code}", status=error.code,
                        retry_after=int(retry_after) if retry_after.isdigit() else None) from None
    except urllib.error.URLError as error:                  # not sent (refused, no route): retried
        raise SendError(f"not sent: {error.reason}", sent=False) from None
    except OSError as error:                                # sent, no answer: retried with the same key, or
        raise SendError(f"no answer: {error}", sent=True) from None   # unknown_outcome if not idempotent
    try:
        return json.loads(data) if data else None           # acked, kept as the intent's response
    except ValueError:
        return None                                         # a 2xx that is not JSON is delivered all the same


if __name__ == "__main__":
    with ConnectionPool("", kwargs={"autocommit": True}, open=True) as pool:   # libpq's PG* variables
        # one intent at a time, each leased for a minute (longer than the call's timeout)
        sender = sync.OutboxSender(pool, TARGET, send, lease=os.environ.get("SENDER_LEASE", "1 minute"), batch=1)
        signal.signal(signal.SIGTERM, lambda *_: sender.stop())
        sender.run()
