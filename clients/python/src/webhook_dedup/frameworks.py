"""The HTTP side for FastAPI/Starlette and Django: the raw body, every
header, and the answer sent exactly as the database computed it. Neither
framework is imported until its helper is called."""

from __future__ import annotations

from typing import Any, Tuple

from .core import Answer, HeaderMap, headers_of


async def from_starlette(request: Any) -> Tuple[bytes, HeaderMap]:
    """The raw body (await request.body(): the exact bytes, never a parse of
    them) and every header of a Starlette/FastAPI request, a repeated one as
    the list of its values."""
    return await request.body(), headers_of(request.headers.items())


def to_starlette(answer: Answer, **extra_headers: str) -> Any:
    """A Starlette Response with exactly the answer's status, headers and
    JSON body (JSONResponse would set its own Content-Type)."""
    from starlette.responses import Response

    return Response(answer.body_bytes(), status_code=answer.status,
                    headers={**answer.headers, **extra_headers})


def from_django(request: Any) -> Tuple[bytes, HeaderMap]:
    """The raw body (request.body: the exact bytes) and the headers of a
    Django request (request.headers; Django joins a header sent twice with
    ",", so the providers' signature headers, sent once, arrive as sent)."""
    return request.body, {name.lower(): value for name, value in request.headers.items()}


def to_django(answer: Answer) -> Any:
    """A Django HttpResponse with exactly the answer's status, headers and
    JSON body (the Content-Type as given, without a charset added)."""
    from django.http import HttpResponse

    content_type = next((v for n, v in answer.headers.items() if n.lower() == "content-type"), "application/json")
    response = HttpResponse(answer.body_bytes(), status=answer.status, content_type=content_type)
    for name, value in answer.headers.items():
        if name.lower() != "content-type":
            response[name] = value
    return response
