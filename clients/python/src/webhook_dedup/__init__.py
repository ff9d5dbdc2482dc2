"""webhook-dedup: the client of the webhook_dedup PostgreSQL extension for
psycopg 3. Every decision (verification, the idempotency key, the claim,
the HTTP answer) is the database's; this package binds the calls safely
and sends back what they return.

    from webhook_dedup import sync      # psycopg.Connection, ConnectionPool (Django, threads)
    from webhook_dedup import aio       # psycopg.AsyncConnection, AsyncConnectionPool (FastAPI)
    from webhook_dedup.frameworks import from_starlette, to_starlette, from_django, to_django
"""

from .core import (MAX_BODY_BYTES, AfterWork, Answer, BodyTooLarge, Claim, ClaimLike, ClaimOutcome, ClaimStatus,
                   Delivery, ErrorHook, FailState, HeaderMap, Intent, Interval, Json, LeaseLost, Mode, NotReady,
                   Outcome, QueuedDelivery, ReceiveOptions, RejectReason, SendError, SenderOptions, answer_after,
                   headers_of)

__version__ = "0.4.0"
__all__ = ["AfterWork", "Answer", "BodyTooLarge", "Claim", "ClaimLike", "ClaimOutcome", "ClaimStatus", "Delivery",
           "ErrorHook", "FailState", "HeaderMap", "Intent", "Interval", "Json", "LeaseLost", "MAX_BODY_BYTES", "Mode",
           "NotReady", "Outcome", "QueuedDelivery", "ReceiveOptions", "RejectReason", "SendError", "SenderOptions",
           "answer_after", "headers_of", "__version__"]
