"""Security middleware: a request-body size limit and the response headers every page gets.

* Bodies larger than ``max_body`` bytes are refused with 413 before the application sees them
  (by ``Content-Length``, and by counting for chunked bodies).
* Every response carries a Content-Security-Policy that allows scripts, styles, images and
  sounds only from this server (pictures and sounds also as ``data:`` URIs) and no inline
  script, ``nosniff``, ``no-referrer`` (answer links carry tokens), ``DENY`` for frames and
  ``no-store`` caching.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["CSP", "BodyLimitMiddleware", "SecurityHeadersMiddleware", "same_token"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The Content-Security-Policy of every response.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "media-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


def same_token(given: str | None, expected: str) -> bool:
    """Compare a presented token with the expected one in constant time.

    Args:
        given: The presented token (``None`` when absent).
        expected: The right token.

    Returns:
        Whether they are equal.
    """
    if not given:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8"))


async def _plain(send: Send, status: int, text: str) -> None:
    body = text.encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", b"%d" % len(body)),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers + _HEADERS})
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    """Refuse request bodies over a size with 413, reading at most ``max_body + 1`` bytes.

    Args:
        app: The wrapped application.
        max_body: Most bytes a body may have.
    """

    def __init__(self, app: ASGIApp, max_body: int = 16 * 1024) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", []):
            if key == b"content-length":
                try:
                    too_big = int(value) > self.max_body
                except ValueError:
                    await _plain(send, 400, "Bad Content-Length.")
                    return
                if too_big:
                    await _plain(send, 413, "Request body too large.")
                    return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await _plain(send, 413, "Request body too large.")
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class SecurityHeadersMiddleware:
    """Add the security headers to every HTTP response.

    Args:
        app: The wrapped application.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in _HEADERS if k not in names]
                message["headers"] = list(message.get("headers", [])) + extra
            await send(message)

        await self.app(scope, receive, send_with_headers)
