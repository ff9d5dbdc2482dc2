"""Runs the Django receiver: checks the database first (a refusal is one line,
"cannot start: ...", and exit status 1), then serves the project's WSGI
application on 127.0.0.1:$PORT with a thread per request (the standard
library's wsgiref; behind a real deployment put gunicorn or uWSGI there, with
the same check at start-up). SIGTERM stops it after the requests in flight.

Configuration: PGHOST, PGPORT, PGUSER, PGDATABASE; PORT (default 8000),
HOST (default 127.0.0.1); WEBHOOK_LEASE, WEBHOOK_WAIT, WEBHOOK_MODE;
WEBHOOK_FAULT_INJECTION=1 (tests only). The worker and the sender of the
persist-then-process mode are the FastAPI example's (../fastapi/worker.py,
../fastapi/sender.py): they do not depend on the web framework.
"""

import os
import signal
import socketserver
import sys
import threading
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import psycopg
from psycopg_pool import ConnectionPool

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = False  # server_close() waits for the requests in flight
    block_on_close = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


def main() -> None:
    from webhook_dedup import NotReady, sync

    try:
        conn = psycopg.connect("", autocommit=True)
    except psycopg.Error as exc:
        sys.exit("cannot start: cannot connect to the database: " + " ".join(str(exc).split()))
    try:
        with conn:
            sync.check_installed(conn)
            error_answer = sync.http_answer(conn, "error")
    except NotReady as exc:
        sys.exit(f"cannot start: {exc}")

    import django
    from django.core.wsgi import get_wsgi_application

    from shop import runtime

    django.setup()
    runtime.error_answer = error_answer
    runtime.pool = ConnectionPool("", min_size=2, max_size=10, kwargs={"autocommit": True}, open=True)
    server = make_server(os.environ.get("HOST", "127.0.0.1"), int(os.environ.get("PORT", "8000")),
                         get_wsgi_application(), server_class=ThreadingWSGIServer, handler_class=QuietHandler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"listening on http://{server.server_address[0]}:{server.server_port}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        runtime.pool.close()


if __name__ == "__main__":
    main()
