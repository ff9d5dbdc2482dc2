"""The README's Django receiver (examples/django_app.py) as it is, served by
gunicorn, with two counters around it for the tests: the body bytes it read
from wsgi.input and its calls of webhook_receive (sync.receive). GET
/__counts answers them (one gunicorn worker: one process counts)."""

import json

import django_app
from webhook_dedup import sync

COUNTS = {"body_bytes": 0, "receive_calls": 0}
_receive = sync.receive


def counting_receive(*args, **kwargs):
    COUNTS["receive_calls"] += 1
    return _receive(*args, **kwargs)


sync.receive = counting_receive


class CountingInput:
    def __init__(self, stream):
        self.stream = stream

    def _count(self, data):
        COUNTS["body_bytes"] += len(data)
        return data

    def read(self, *args):
        return self._count(self.stream.read(*args))

    def readline(self, *args):
        return self._count(self.stream.readline(*args))

    def readlines(self, *args):
        return [self._count(line) for line in self.stream.readlines(*args)]

    def __iter__(self):
        return (self._count(line) for line in self.stream)


def application(environ, start_response):
    if environ["PATH_INFO"] == "/__counts":
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(COUNTS).encode()]
    environ["wsgi.input"] = CountingInput(environ["wsgi.input"])
    return django_app.application(environ, start_response)
