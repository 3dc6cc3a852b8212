"""Who may change what: read-only mode, the authorize hook, CSRF tokens, the actor, redaction.

Every state-changing request is a POST that passes, in order: read-only mode
(refused with 403 whatever else it carries), the CSRF check (the form's
``csrf`` field must equal the ``venturi_csrf`` cookie this dashboard set, a
double-submit token another site can neither read nor forge; a cross-origin
``Origin`` header is refused too), then the application's ``authorize(request,
action, job_ids)`` hook.  Only then does the action run; it journals the actor.
"""

from __future__ import annotations

import hmac
import inspect
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request

CSRF_COOKIE = "venturi_csrf"
CSRF_FIELD = "csrf"

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


def csrf_token(request: Request) -> str:
    """The request's CSRF cookie value, or a fresh token (the response then sets the cookie)."""
    existing = request.cookies.get(CSRF_COOKIE)
    if existing and len(existing) >= 32:
        return existing
    token: str = request.state.__dict__.setdefault("new_csrf", secrets.token_urlsafe(32))
    return token


def check_csrf(request: Request, submitted: object) -> None:
    """Refuse unless ``submitted`` equals the CSRF cookie and the request is not cross-origin."""
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host", ""):
        raise Refused(403, f"cross-origin request from {origin} refused")
    cookie = request.cookies.get(CSRF_COOKIE, "")
    if not cookie or not isinstance(submitted, str) or not hmac.compare_digest(cookie, submitted):
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
