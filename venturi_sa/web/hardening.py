"""What every request and response of the dashboard passes: a request body bound, security headers.

:class:`Hardened` wraps the dashboard's ASGI app.  A request whose
``Content-Length`` exceeds :data:`MAX_BODY` is answered 413 before anything
reads it; a body sent without a length is counted as it is read, and the read
fails with :class:`BodyTooLarge` (413) once it passes the bound, so no form is
ever parsed from more than :data:`MAX_BODY` bytes.  Every response carries
``X-Frame-Options: DENY``, a Content-Security-Policy that allows scripts from
the dashboard's own origin only and no framing, ``nosniff`` and a same-origin
referrer policy.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from venturi_sa.web.security import Refused

MAX_BODY = 1024 * 1024
"""The most bytes a request body may have (a replaced payload is at most 100,000 characters)."""

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; "
       "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
"""Scripts, styles and connections from the dashboard's origin only; never inside a frame."""

HEADERS = [(b"x-frame-options", b"DENY"), (b"content-security-policy", CSP.encode()),
           (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin")]


class BodyTooLarge(Refused):
    """A request body over :data:`MAX_BODY` bytes: answered 413, never parsed."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body over {limit} bytes refused")


class Hardened:
    """ASGI middleware: the body bound and the security headers (see the module docstring)."""

    def __init__(self, app: ASGIApp, max_body: int = MAX_BODY) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_hardened(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                message = {**message, "headers": [*message.get("headers", []),
                                                  *(h for h in HEADERS if h[0] not in names)]}
            await send(message)

        if self._declared(scope) > self.max_body:
            await self._too_large(send_hardened)
            return
        await self.app(scope, self._counting(receive), send_hardened)

    @staticmethod
    def _declared(scope: Scope) -> int:
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    return int(value)
                except ValueError:
                    return 0
        return 0

    def _counting(self, receive: Receive) -> Receive:
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message: Any = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    raise BodyTooLarge(self.max_body)
            return message  # type: ignore[no-any-return]

        return counted

    async def _too_large(self, send: Send) -> None:
        text = f"request body over {self.max_body} bytes refused\n".encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(text)).encode()), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": text})
