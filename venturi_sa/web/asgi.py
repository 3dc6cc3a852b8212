"""The dashboard as an ASGI application: :func:`create_app`.

Mount it in a FastAPI or Starlette application (``app.mount("/venturi",
create_app(engine, "shop"))``), wrap it for a WSGI one (docs/dashboard.md: Flask
with ``a2wsgi``), or run it alone (``venturi web``).  It serves one
:class:`~venturi_sa.web.app.Dashboard`: the built-in routes
(:mod:`venturi_sa.web.routes`), the extra pages and the static files.
"""

from __future__ import annotations

import inspect
import secrets
from collections.abc import Iterable, Sequence
from pathlib import Path

import sqlalchemy as sa
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from venturi_sa.models import make_models
from venturi_sa.prefix import validate_prefix
from venturi_sa.storage.query_timeouts import DEFAULT_SECONDS
from venturi_sa.task import Registry, Task
from venturi_sa.web import limits_page, pauses, routes
from venturi_sa.web.actions import Action
from venturi_sa.web.app import HERE, Dashboard, Page
from venturi_sa.web.hardening import Hardened
from venturi_sa.web.security import ActorOf, Authorize, Redact, default_actor, no_redaction


def _page_route(page: Page, dashboard: Dashboard) -> Route:
    async def endpoint(request: Request) -> Response:
        await dashboard.may_view(request)
        result = page.endpoint(request, dashboard)
        return await result if inspect.isawaitable(result) else result

    return Route(page.path, endpoint, methods=list(page.methods), name=f"page:{page.path}")


def _secret(given: str | bytes | None) -> bytes:
    if given is None:
        return secrets.token_bytes(32)
    raw = given.encode() if isinstance(given, str) else given
    if len(raw) < 16:
        raise ValueError("create_app(secret=...) needs at least 16 bytes")
    return raw


def create_app(engine: sa.Engine, prefix: str = "venturi", *, read_only: bool = False,
               authorize: Authorize | None = None, redact: Redact | None = None,
               actor: ActorOf | None = None, actions: Sequence[Action] = (), pages: Sequence[Page] = (),
               poll_interval: float = 2.0, listen: bool = True, title: str | None = None,
               template_dirs: Sequence[str | Path] = (),
               tasks: Registry | Iterable[type[Task]] = (), secret: str | bytes | None = None,
               query_timeout: float | None = DEFAULT_SECONDS) -> Starlette:
    """The dashboard of queue ``prefix`` on ``engine`` (a sync Engine), as a Starlette app.

    ``read_only`` refuses every action on the server (403) and hides the buttons.
    ``authorize(request, action, job_ids)`` is asked before each action, and
    with action ``"view"`` before every page, fragment and live stream (anything
    but True answers 403); ``secret`` signs the CSRF tokens and confirmations
    (default: random per app, so tokens end with the process);
    ``redact(kind, field, value)`` filters payloads, carries and attachments
    before they are shown; ``actor(request)`` names who acted in the journal
    (default: the host app's authenticated user, else the client address).
    ``actions`` and ``pages`` extend the built-in ones.  ``tasks`` (your
    task types, or ``queue.registry``) lets the job page replace a payload,
    validated by its task's schema.  The live feed polls
    the queue at most every ``poll_interval`` seconds while a browser watches,
    and wakes on the queue's NOTIFY unless ``listen`` is False (e.g. behind PgBouncer
    in transaction mode).  The app holds no transaction open between requests.
    Every transaction it opens (reads, the live feed's check, actions) waits at
    most ``query_timeout`` seconds (default 5; None: no bound) for a lock or a
    statement (``SET LOCAL statement_timeout`` and ``lock_timeout``); a page
    whose read is cancelled so answers 503 "busy" with ``Retry-After`` and its
    connection goes back to the pool, and an action so cancelled is rolled back
    and reported.
    """
    models = make_models(validate_prefix(prefix))
    dashboard = Dashboard(engine, models, read_only=read_only, authorize=authorize,
                          redact=redact or no_redaction, actor=actor or default_actor, actions=actions,
                          pages=pages, poll_interval=poll_interval, listen=listen,
                          title=title or f"venturi · {prefix}", template_dirs=template_dirs,
                          tasks=tasks if isinstance(tasks, Registry) else Registry(tuple(tasks)),
                          secret=_secret(secret), query_timeout=query_timeout,
                          operations=(*pauses.OPERATIONS, *limits_page.OPERATIONS))
    table: list[BaseRoute] = [
        *routes.routes(dashboard),
        *limits_page.routes(dashboard),
        *(_page_route(p, dashboard) for p in dashboard.pages),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(routes=table, exception_handlers=routes.handlers(dashboard), middleware=[Middleware(Hardened)])
    app.state.dashboard = dashboard
    return app


__all__ = ["create_app"]
