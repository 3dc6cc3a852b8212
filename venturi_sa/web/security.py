"""Who may see and change what: the authorize hook, read-only mode, CSRF tokens, the actor, redaction.

Every page, fragment and live stream first asks ``authorize(request, "view",
job_ids)`` (the job's id on a job's page, else none).  Every state-changing
request is a POST that passes, in order: read-only mode (refused with 403
whatever else it carries), the CSRF check (the form's ``csrf`` field must equal
the dashboard's cookie, and be a nonce signed with HMAC-SHA256 under the
dashboard's secret, so neither another site nor a planted cookie can supply
one; a cross-origin or ``null`` ``Origin`` is refused too), then
``authorize(request, action, job_ids)``.  Only then does the action run; it
journals the actor.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request

CSRF_COOKIE = "venturi_csrf"
SECURE_CSRF_COOKIE = "__Host-venturi_csrf"
"""The cookie's name over HTTPS: ``__Host-`` makes the browser refuse it unless ``Secure``, path ``/``, no domain."""
CSRF_FIELD = "csrf"
VIEW = "view"
"""The action ``authorize`` is asked about before a page, a fragment or the live stream is shown."""

Authorize = Callable[[Request, str, Sequence[str]], "bool | Awaitable[bool]"]
"""``authorize(request, action, job_ids) -> bool`` (or an awaitable of it): may this request act?"""

Redact = Callable[[str, str, Any], Any]
"""``redact(kind, field, value) -> value`` for ``field`` in payload, carry, attachment: hide secrets."""

ActorOf = Callable[[Request], str]
"""``actor(request) -> str``: who is acting, written into the journal note of each action."""


class Refused(Exception):
    """A state-changing request that may not proceed: ``status`` (403/400) and a one-line reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def sign(secret: bytes, *parts: str) -> str:
    """HMAC-SHA256 of ``parts`` under ``secret``, URL-safe hex."""
    return hmac.new(secret, "\x1f".join(parts).encode(), hashlib.sha256).hexdigest()


def csrf_cookie_name(request: Request) -> str:
    """``__Host-venturi_csrf`` when the request came over HTTPS, else ``venturi_csrf``."""
    return SECURE_CSRF_COOKIE if request.url.scheme == "https" else CSRF_COOKIE


def _valid(secret: bytes, token: str) -> bool:
    nonce, _, mac = token.partition(".")
    return len(nonce) >= 32 and hmac.compare_digest(mac, sign(secret, "csrf", nonce))


def csrf_token(request: Request, secret: bytes) -> str:
    """The request's CSRF cookie if signed under ``secret``, else a fresh signed token (the response sets it)."""
    existing = request.cookies.get(csrf_cookie_name(request), "")
    if _valid(secret, existing):
        return existing
    token: str | None = getattr(request.state, "new_csrf", None)  # Starlette keeps state in `_state`
    if token is None:  # one fresh token per request, however many forms the page draws
        nonce = secrets.token_urlsafe(32)
        token = request.state.new_csrf = f"{nonce}.{sign(secret, 'csrf', nonce)}"
    return token


def check_origin(request: Request) -> None:
    """Refuse a request whose ``Origin`` is ``null`` or names another host than ``Host``."""
    origin = request.headers.get("origin")
    if origin is None:
        return
    if origin == "null" or urlsplit(origin).netloc != request.headers.get("host", ""):
        raise Refused(403, f"cross-origin request from {origin} refused")


def check_csrf(request: Request, submitted: object, secret: bytes) -> None:
    """Refuse unless ``submitted`` equals the CSRF cookie, is signed under ``secret`` and the request is same-origin."""
    check_origin(request)
    cookie = request.cookies.get(csrf_cookie_name(request), "")
    if (not isinstance(submitted, str) or not _valid(secret, cookie)
            or not hmac.compare_digest(cookie, submitted)):
        raise Refused(403, "missing or wrong CSRF token: reload the page and try again")


async def check_authorized(authorize: Authorize | None, request: Request, action: str,
                           job_ids: Sequence[str]) -> None:
    """Refuse unless the application's hook allows ``action`` on ``job_ids`` (no hook: allowed)."""
    if authorize is None:
        return
    verdict = authorize(request, action, list(job_ids))
    if inspect.isawaitable(verdict):
        verdict = await verdict
    if verdict is not True:
        raise Refused(403, f"not authorized to {action} these jobs")


def default_actor(request: Request) -> str:
    """The authenticated user's name when the host app has authentication, else the client address."""
    user = request.scope.get("user")
    name = getattr(user, "display_name", None) if getattr(user, "is_authenticated", False) else None
    if name:
        return f"{name} via dashboard"
    client = request.client.host if request.client else "unknown"
    return f"dashboard user at {client}"


def no_redaction(kind: str, field: str, value: Any) -> Any:
    return value
