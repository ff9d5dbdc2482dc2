"""The README's FastAPI receiver (examples/fastapi_app.py) as it is, served
by uvicorn, with two counters around it for the tests: the body bytes it
took from the server (every http.request message it received) and its calls
of webhook_receive (aio.receive). GET /__counts answers them."""

import json

import fastapi_app
from webhook_dedup import aio

COUNTS = {"body_bytes": 0, "receive_calls": 0}
_receive = aio.receive


async def counting_receive(*args, **kwargs):
    COUNTS["receive_calls"] += 1
    return await _receive(*args, **kwargs)


aio.receive = counting_receive


async def app(scope, receive, send):
    if scope["type"] == "http" and scope["path"] == "/__counts":
        body = json.dumps(COUNTS).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
        return
    if scope["type"] != "http":
        await fastapi_app.app(scope, receive, send)
        return

    async def counted():
        message = await receive()
        if message["type"] == "http.request":
            COUNTS["body_bytes"] += len(message.get("body", b""))
        return message

    await fastapi_app.app(scope, counted, send)
