"""The dashboard's application object, :class:`Dashboard` (and the extra :class:`Page`), that every route serves.

:func:`venturi_sa.web.asgi.create_app` builds one and the ASGI application
around it.  It reads through the operations API and the storage seam in short
transactions of its own, never the application's session; actions are the
operations' own transactions, one per job.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
import sqlalchemy as sa
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from venturi_sa.models import Models
from venturi_sa.storage.query_timeouts import DEFAULT_SECONDS, bounded
from venturi_sa.task import Registry
from venturi_sa.web import charts, queries
from venturi_sa.web.actions import Action, registry
from venturi_sa.web.live import Feed
from venturi_sa.web.security import (
    VIEW,
    ActorOf,
    Authorize,
    Redact,
    Refused,
    check_authorized,
    check_csrf,
    csrf_cookie_name,
    csrf_token,
)

HERE = Path(__file__).parent
JSON_SHOWN = 64_000
"""The most characters of one JSON value a job page shows (the rest is a download)."""


@dataclass(frozen=True, kw_only=True)
class Page:
    """An extra page (schedules, paused kinds, ...): a nav entry and its endpoint.

    ``endpoint(request, dashboard)`` returns a response (or an awaitable one);
    :meth:`Dashboard.render` draws a template in the dashboard's layout and
    :meth:`Dashboard.guard` runs the checks every state-changing request needs.
    Before the endpoint runs, ``authorize(request, "view", [])`` must allow it.
    """

    path: str
    title: str
    endpoint: Callable[[Request, Dashboard], Response | Awaitable[Response]]
    methods: tuple[str, ...] = ("GET",)
    nav: bool = True


def _ts(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _ago(value: timedelta | None) -> str:
    if value is None:
        return "-"
    seconds = value.total_seconds()
    if abs(seconds) < 1:
        return f"{seconds * 1000:.0f} ms"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if abs(seconds) >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"


class Dashboard:
    """One queue's dashboard: its settings, templates, live feed and action registry."""

    def __init__(self, engine: sa.Engine, models: Models, *, read_only: bool, authorize: Authorize | None,
                 redact: Redact, actor: ActorOf, actions: Sequence[Action], pages: Sequence[Page],
                 poll_interval: float, listen: bool, title: str, template_dirs: Sequence[str | Path],
                 tasks: Registry, secret: bytes, query_timeout: float | None = DEFAULT_SECONDS,
                 operations: Sequence[str]) -> None:
        self.engine = bounded(engine, query_timeout)
        self.secret = secret
        self.tasks = tasks
        self.models = models
        self.read_only = read_only
        self.authorize = authorize
        self.redact = redact
        self.actor = actor
        self.actions = registry(actions)
        self.pages = tuple(pages)
        self.operations = tuple(operations)
        """The names of the schedules page's operations (``POST /schedules``), which :meth:`allowed` asks about."""
        self.title = title
        self.feed = Feed(engine, models.names.channel, lambda: queries.token(models, engine),
                         poll_interval=poll_interval, listen=listen)
        loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader([str(d) for d in template_dirs]),
                                      jinja2.FileSystemLoader(str(HERE / "templates"))])
        env = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined)
        env.filters.update(ts=_ts, ago=_ago, pretty=self.pretty)
        env.globals.update(charts=charts)
        self.templates = Jinja2Templates(env=env)

    @property
    def prefix(self) -> str:
        return self.models.prefix

    def pretty(self, value: Any, kind: str = "", field: str = "payload", indent: int | None = 2) -> str:
        """``value`` after the redaction hook, as JSON (indented; or on one line, as the text search sees it)."""
        shown = self.redact(kind, field, value)
        separators = (",", ": ") if indent else (", ", ": ")
        return json.dumps(shown, indent=indent, sort_keys=True, default=str, separators=separators)

    def shown(self, value: Any, kind: str, field: str) -> tuple[str, int]:
        """:meth:`pretty` cut to :data:`JSON_SHOWN` characters, and the full length (a page links the rest)."""
        text = self.pretty(value, kind, field)
        return text[:JSON_SHOWN], len(text)

    def actions_for(self, status: str) -> list[Action]:
        """The actions a job in ``status`` can take (its page offers these)."""
        return [a for a in self.actions.values() if status in a.statuses]

    @property
    def bulk_actions(self) -> list[Action]:
        """The actions the jobs page offers on a selection and on all matching."""
        return [a for a in self.actions.values() if a.bulk]

    @property
    def bulk_fields(self) -> list[str]:
        """The form fields the bulk actions read, each once, in order."""
        return list(dict.fromkeys(f for a in self.bulk_actions for f in a.fields))

    def editable_payload(self, kind: str, payload: Any) -> str:
        """The payload as indented JSON to edit, or "" when redaction hides part of it (never prefill a mask)."""
        if self.redact(kind, "payload", copy.deepcopy(payload)) != payload:
            return ""
        text = json.dumps(payload, indent=2, sort_keys=True)
        return text if len(text) <= JSON_SHOWN else ""

    def base(self, request: Request) -> str:
        """The URL path this dashboard is mounted at ("" at the root)."""
        return str(request.scope.get("root_path", "")).rstrip("/")

    def render(self, request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
        """``template`` drawn in the dashboard's layout; sets the CSRF cookie on a first visit."""
        token = csrf_token(request, self.secret)
        base = self.base(request)
        context.setdefault("page", "")
        context.setdefault("msg", request.query_params.get("msg", ""))
        context.setdefault("allowed", getattr(request.state, "venturi_allowed", frozenset()))
        context.update(dashboard=self, base=base, csrf=token)
        response = self.templates.TemplateResponse(request, template, context, status_code=status_code)
        name = csrf_cookie_name(request)
        if request.cookies.get(name) != token:
            secure = request.url.scheme == "https"
            response.set_cookie(name, token, httponly=True, samesite="strict", secure=secure,
                                path="/" if secure else base or "/")
        response.headers["Cache-Control"] = "no-store"
        return response

    def back(self, request: Request, target: str, message: str) -> Response:
        """303 to ``target`` (a path of this dashboard only, else its jobs page), showing ``message``."""
        base = self.base(request)
        if not target.startswith(base + "/") or target.startswith("//") or "\\" in target:
            target = base + "/jobs"
        path, _, query = target.partition("?")
        kept = "&".join(p for p in query.split("&") if p and not p.startswith("msg="))
        joiner = "&" if kept else ""
        return RedirectResponse(f"{path}?{kept}{joiner}{urlencode({'msg': message})}", status_code=303)

    def check_request(self, request: Request, form: Any, action: str) -> None:
        """Read-only mode, then the CSRF token: raises :class:`Refused` unless both pass."""
        if self.read_only:
            raise Refused(403, f"this dashboard is read-only: {action} refused")
        check_csrf(request, form.get("csrf"), self.secret)

    async def may_view(self, request: Request, job_ids: Sequence[str] = ()) -> None:
        """``authorize(request, "view", job_ids)``: :class:`Refused` (403) unless it allows the request.

        Then asks ``authorize(request, action, job_ids)`` for every action and
        schedules-page operation, so that the page draws only the buttons and
        forms of those it allows (none when read-only); the server still checks
        each action when it is submitted.
        """
        await check_authorized(self.authorize, request, VIEW, job_ids)
        request.state.venturi_allowed = await self.allowed(request, job_ids)

    async def allowed(self, request: Request, job_ids: Sequence[str] = ()) -> frozenset[str]:
        """The names of the actions and operations ``authorize`` allows on ``job_ids`` (all without a hook)."""
        if self.read_only:
            return frozenset()
        names = [*self.actions, *self.operations]
        allowed = []
        for name in names:
            try:
                await check_authorized(self.authorize, request, name, job_ids)
            except Refused:
                continue
            allowed.append(name)
        return frozenset(allowed)

    @staticmethod
    def fields_of(actions: Sequence[Action]) -> list[str]:
        """The form fields ``actions`` read, each once, in order."""
        return list(dict.fromkeys(f for a in actions for f in a.fields))

    async def guard(self, request: Request, form: Any, action: str, job_ids: Sequence[str]) -> None:
        """Read-only, CSRF, then ``authorize(request, action, job_ids)``: :class:`Refused` unless all pass."""
        self.check_request(request, form, action)
        await check_authorized(self.authorize, request, action, job_ids)
