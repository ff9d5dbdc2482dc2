"""A deduplicating downstream on loopback, as Stripe's idempotency keys
work: `POST /calls` performs a call once per Idempotency-Key and answers a
repeat with the first call's answer; every request is recorded, repeats
included. Scripted answers (`fail_next(key, status, retry_after)`) are
given before performing, without effect; `hold_next()` makes the next call
be performed and then wait, unanswered, until `release()`."""

import http.server
import json
import threading


class Downstream:
    def __init__(self):
        self.requests = []        # (Idempotency-Key, the JSON body), in arrival order
        self.performed = {}       # key -> the answer of the call that performed it
        self.failures = {}        # key -> [(status, retry_after)], answered first, in order
        self.lock = threading.Lock()
        self.hold = None          # (performed: Event, release: Event) for the next call
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                key = self.headers.get("Idempotency-Key")
                with outer.lock:
                    outer.requests.append((key, json.loads(body) if body else None))
                    scripted = outer.failures.get(key) or []
                    failure = scripted.pop(0) if scripted else None
                    hold, outer.hold = (outer.hold, None) if failure is None else (None, outer.hold)
                    if failure is None and key not in outer.performed:
                        outer.performed[key] = {"id": f"n_{len(outer.performed) + 1}"}
                    answer = outer.performed.get(key)
                if hold:
                    hold[0].set()
                    hold[1].wait(60)
                if failure:
                    status, retry_after = failure
                    data = json.dumps({"error": status}).encode()
                else:
                    status, retry_after, data = 200, None, json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    if retry_after is not None:
                        self.send_header("Retry-After", str(retry_after))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the caller is gone (killed while we held the answer)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/calls"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def fail_next(self, key, status, retry_after=None):
        with self.lock:
            self.failures.setdefault(key, []).append((status, retry_after))

    def hold_next(self):
        performed, release = threading.Event(), threading.Event()
        with self.lock:
            self.hold = (performed, release)
        return performed, release

    def keys(self, key=None):
        with self.lock:
            return [k for k, _ in self.requests if key is None or k == key]

    def close(self):
        self.server.shutdown()
        self.server.server_close()
