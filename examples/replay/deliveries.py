"""Signed deliveries as three providers send them, for the example receivers.

GitHub deliveries are the real fixtures (tests/fixtures/github), made a new
event by replay.as_new_event and signed as GitHub signs (replay.sign).
Stripe and Standard Webhooks (Svix, Clerk, Resend) bodies are built here in
each provider's event shape and signed by the extension's own
`webhook_sign`, which produces the headers the provider would send:

- Stripe: `Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`
  (docs.stripe.com/webhooks#verify-manually); the event id is the body's
  `id`, its time `created` (Unix seconds).
- Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature:
  v1,<base64 HMAC-SHA256 of "id.timestamp.body">` with the base64 key of a
  `whsec_` secret (github.com/standard-webhooks/standard-webhooks, spec
  "Verifying webhook authenticity"); the event id is `webhook-id`, its time
  the body's `timestamp` (RFC 3339).

Every function returns a Delivery: the event id the provider's profile reads,
the exact body bytes and the headers to POST with them.
"""

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

from replay import as_new_event, github_headers, sign


@dataclass(frozen=True)
class Delivery:
    provider: str  # the route and scheme: github, stripe or standard
    event_id: str  # what webhook_dedup.webhook_key(provider, event_id) is derived from
    body: bytes
    headers: dict

    def with_body(self, body: bytes) -> "Delivery":
        """The same headers (signature included) over other bytes: a tampered delivery."""
        return Delivery(self.provider, self.event_id, body, self.headers)


def github(fixture_body: bytes, event: str, secret: str, delivery_id: str = None) -> Delivery:
    """A real GitHub fixture as a new event, signed with X-Hub-Signature-256."""
    delivery_id = delivery_id or str(uuid.uuid4())
    body = as_new_event(fixture_body, delivery_id)
    return Delivery("github", delivery_id, body, github_headers(delivery_id, event, sign(secret, body)))


def stripe(conn, secret: str, event_type: str, object_id: str, created: int,
           event_id: str = None) -> Delivery:
    """A Stripe event about `object_id`, created at `created` (Unix seconds), signed now."""
    event_id = event_id or f"evt_{uuid.uuid4().hex[:24]}"
    body = json.dumps({
        "id": event_id,
        "object": "event",
        "api_version": "2024-06-20",
        "created": created,
        "type": event_type,
        "livemode": False,
        "pending_webhooks": 1,
        "data": {"object": {"id": object_id, "object": event_type.split(".")[0],
                            "status": event_type.rsplit(".", 1)[-1]}},
    }).encode()
    return Delivery("stripe", event_id, body, _signed(conn, "stripe", body, secret))


def standard(conn, secret: str, event_type: str, object_id: str, at: datetime = None,
             msg_id: str = None) -> Delivery:
    """A Standard Webhooks message about `object_id`, signed now with the
    whsec_ key; its webhook-id is `msg_id` (a new one when None)."""
    msg_id = f"msg_{uuid.uuid4().hex}" if msg_id is None else msg_id
    at = at or datetime.now(timezone.utc)
    body = json.dumps({
        "type": event_type,
        "timestamp": at.isoformat().replace("+00:00", "Z"),
        "data": {"id": object_id, "object": event_type.split(".")[0]},
    }).encode()
    return Delivery("standard", msg_id, body, _signed(conn, "standard", body, secret, msg_id))


def _signed(conn, scheme: str, body: bytes, secret: str, msg_id: str = None) -> dict:
    """The headers webhook_sign says the provider sends with `body`, plus Content-Type."""
    headers = conn.execute("SELECT webhook_dedup.webhook_sign(%s, %s, %s, msg_id => %s)",
                           (scheme, body, secret, msg_id)).fetchone()[0]
    return {"Content-Type": "application/json", **headers}
