"""The receiver's two views. The contract is ../../README.md's: one
webhook_receive call (verify, key, claim or enqueue), the job on claimed and
reclaimed, and every answer exactly as the database computed it. The call,
the raw body and headers and the answers are the webhook-dedup package's
(webhook_dedup.sync, from_django, to_django)."""

import dataclasses
import logging
import os

from django.views.decorators.http import require_GET, require_POST
from webhook_dedup import Answer, BodyTooLarge, answer_after, sync
from webhook_dedup.frameworks import from_django, to_django

from . import job, runtime

log = logging.getLogger("webhook_dedup.example")

PROVIDERS = {"github", "stripe", "standard"}
# Schemes that sign the request URL: they need `url`, any other scheme
# refuses one (SQLSTATE 22023). None of ours does.
URL_SIGNED = {"twilio", "square", "hubspot"}
LEASE = os.environ.get("WEBHOOK_LEASE") or None
WAIT = os.environ.get("WEBHOOK_WAIT") or None
MODE = os.environ.get("WEBHOOK_MODE", "claim")
FAULT_INJECTION = os.environ.get("WEBHOOK_FAULT_INJECTION") == "1"  # tests only
JSON = {"Content-Type": "application/json"}


def respond(answer: Answer, resumed_from=None):
    """The answer as computed; to_django adds X-Webhook-Outcome for a
    delivery's answer, and this the tests' X-Webhook-Resumed-From: neither
    is needed by the pattern."""
    if resumed_from:
        return to_django(answer, **{"X-Webhook-Resumed-From": resumed_from})
    return to_django(answer)


@require_GET
def healthz(request):
    return respond(Answer(200, JSON, {"status": "ok"}))


@require_POST
def receive(request, provider: str):
    if provider not in PROVIDERS:
        return respond(Answer(404, JSON, {"error": "unknown provider"}))
    try:
        body, headers = from_django(request)  # the exact bytes the provider signed, at most 25 MB
    except BodyTooLarge as refused:
        return respond(refused.answer)  # 413, the rest of the body never read
    url = request.build_absolute_uri() if provider in URL_SIGNED else None
    try:
        with runtime.pool.connection() as conn:  # autocommit: the claim commits when the call returns
            delivery = sync.receive(conn, provider, body, headers, url=url, lease=LEASE, mode=MODE, wait=WAIT)
        if not delivery.must_process:
            return respond(delivery.answer)
        fault = request.headers.get("X-Demo-Fault") if FAULT_INJECTION and delivery.attempt == 1 else None
        result = job.run(runtime.pool, delivery, body, fault)
        if result is None:
            # our lease expired and another worker took the key over
            with runtime.pool.connection() as conn:
                lost = sync.http_answer(conn, "lease_lost", scheme=provider)
                return respond(dataclasses.replace(lost, outcome=delivery.outcome))
        resumed = job.NOTIFIED if delivery.last_step == job.NOTIFIED else None
        return respond(answer_after(delivery, result), resumed)
    except Exception:  # noqa: BLE001 - a database error or a bug: the same answer
        # the provider retries a 5xx; the details go to the log only
        log.exception("error on a %s delivery", provider)
        return respond(runtime.error_answer)
