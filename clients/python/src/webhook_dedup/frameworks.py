"""The HTTP side for FastAPI/Starlette and Django: the raw body (at most
`limit` bytes), every header, and the answer sent exactly as the database
computed it. Neither framework is imported until its helper is called.
Starlette's Request and Response are typed; Django's request and
HttpResponse are Any (Django ships no types)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from .core import MAX_BODY_BYTES, Answer, BodyTooLarge, HeaderMap, headers_of

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

#: What from_django reads at a time.
CHUNK_BYTES = 64 * 1024


def _declared_length(value: Optional[str]) -> Optional[int]:
    """A Content-Length as an int, None when there is none (or it does not
    parse: the server then frames the body itself)."""
    try:
        return int(value) if value is not None and value != "" else None
    except (TypeError, ValueError):
        return None


async def from_starlette(request: Request, limit: int = MAX_BODY_BYTES) -> Tuple[bytes, HeaderMap]:
    """The raw body (the exact bytes, never a parse of them) and every header
    of a Starlette/FastAPI request, a repeated one as the list of its values.
    At most `limit` bytes (default 25 MB): a Content-Length over it is refused
    before any byte is read, and a body without one (chunked) is read from
    request.stream() chunk by chunk and refused as soon as it passes the
    limit; the rest is never read. The refusal is BodyTooLarge (status 413,
    `.answer` the 413 answer)."""
    declared = _declared_length(request.headers.get("content-length"))
    if declared is not None and declared > limit:
        raise BodyTooLarge(limit)
    chunks: List[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks), headers_of(request.headers.items())


def _with_outcome(answer: Answer, extra: Dict[str, str]) -> Dict[str, str]:
    headers = dict(answer.headers)
    if answer.outcome and not any(name.lower() == "x-webhook-outcome" for name in headers):
        headers["X-Webhook-Outcome"] = answer.outcome
    headers.update(extra)
    return headers


def to_starlette(answer: Answer, **extra_headers: str) -> Response:
    """A Starlette Response with exactly the answer's status, headers and
    JSON body (JSONResponse would set its own Content-Type), plus
    X-Webhook-Outcome when the answer has an outcome (a delivery's answer
    does) and any extra headers."""
    from starlette.responses import Response

    return Response(answer.body_bytes(), status_code=answer.status, headers=_with_outcome(answer, extra_headers))


def from_django(request: Any, limit: int = MAX_BODY_BYTES) -> Tuple[bytes, HeaderMap]:
    """The raw body (the exact bytes) and the headers of a Django request
    (request.headers; Django joins a header sent twice with ",", so the
    providers' signature headers, sent once, arrive as sent). At most
    `limit` bytes (default 25 MB): a CONTENT_LENGTH over it is refused
    before any byte is read; the body is read in chunks (request.read, so
    Django's DATA_UPLOAD_MAX_MEMORY_SIZE, which guards request.body, does
    not apply: `limit` does), and a body without a length (chunked) is read
    from the server's wsgi.input where the server marks it terminated
    (`wsgi.input_terminated`: gunicorn, mod_wsgi), refused as soon as it
    passes the limit. The refusal is BodyTooLarge (status 413, `.answer`)."""
    meta = request.META
    declared = _declared_length(meta.get("CONTENT_LENGTH"))
    if declared is not None and declared > limit:
        raise BodyTooLarge(limit)
    if declared is None and meta.get("wsgi.input_terminated") and not getattr(request, "_read_started", False):
        read = meta["wsgi.input"].read  # Django reads nothing without a length: the server ends this stream
    else:
        read = request.read
    chunks: List[bytes] = []
    size = 0
    while True:
        chunk = read(CHUNK_BYTES)
        if not chunk:
            break
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks), {name.lower(): value for name, value in request.headers.items()}


def to_django(answer: Answer, **extra_headers: str) -> Any:
    """A Django HttpResponse with exactly the answer's status, headers and
    JSON body (the Content-Type as given, without a charset added), plus
    X-Webhook-Outcome when the answer has an outcome and any extra headers."""
    from django.http import HttpResponse

    headers = _with_outcome(answer, extra_headers)
    content_type = next((v for n, v in headers.items() if n.lower() == "content-type"), "application/json")
    response = HttpResponse(answer.body_bytes(), status=answer.status, content_type=content_type)
    for name, value in headers.items():
        if name.lower() != "content-type":
            response[name] = value
    return response
