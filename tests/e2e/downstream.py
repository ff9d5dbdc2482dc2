"""A downstream service on loopback for the outbox's end-to-end tests (and
tests/cluster/test_outbox.py): `POST /calls` performs a call once per
`Idempotency-Key` and answers a repeat with the first call's answer, as
Stripe's idempotency keys do; every request is recorded, repeats included.
A request without the header is performed every time (a service without
idempotency keys)."""

import http.server
import json
import threading


class Downstream:
    def __init__(self):
        self.requests = []  # (Idempotency-Key or None, the JSON body), in arrival order
        self.performed = {}  # key -> the answer of the call that performed it
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                key = self.headers.get("Idempotency-Key")
                with outer.lock:
                    outer.requests.append((key, json.loads(body) if body else None))
                    slot = key if key is not None else f"(no key {len(outer.requests)})"
                    if slot not in outer.performed:
                        outer.performed[slot] = {"id": f"n_{len(outer.performed) + 1}"}
                    answer = outer.performed[slot]
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/calls"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def keys(self) -> list:
        with self.lock:
            return [k for k, _ in self.requests]

    def close(self):
        self.server.shutdown()
        self.server.server_close()
