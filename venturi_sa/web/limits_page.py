"""The Limits page: every limit in force with its use, and setting or clearing an override, confirmed first.

``GET /limits`` lists the limits the dashboard's tasks declare (``tasks=``;
without them only overrides are known, and the page says so) and the
runtime overrides, through ``queue.limits`` (one short read-only
transaction).  ``POST /limits`` with ``do`` one of :data:`OPERATIONS` passes
the checks every action passes (read-only mode, the CSRF token, then
``authorize(request, do, [])``: a limit is a kind's, so the hook gets no job
ids) and changes nothing: it answers a page naming the change, whose form
carries one signed, expiring field (:mod:`venturi_sa.web.confirm_token`,
bound to the browser's CSRF token).  Only that form, posted within
:data:`~venturi_sa.web.confirm_token.CONFIRM_SECONDS`, acts: the checks run
again, then ``set_limit`` or ``clear_limit`` runs in its own short
transaction (committed when it returns, rolled back on any error, so a
refused or failed change changes nothing), recorded with the actor in
``<prefix>_limit_log``; it holds from every worker's next claim.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from venturi_sa.cli.durations import BadDuration, parse_duration
from venturi_sa.declarations.limit_rules import Rate
from venturi_sa.errors import InvalidOption, VenturiError
from venturi_sa.models.limit_tables import LIMIT_NAMES
from venturi_sa.ops.face import Operations
from venturi_sa.ops.limits import LimitInfo
from venturi_sa.storage.limits import RATES
from venturi_sa.web import forms
from venturi_sa.web.app import Dashboard
from venturi_sa.web.confirm_token import SELECTION_FIELD, BadConfirmation, decode, encode
from venturi_sa.web.security import check_authorized

OPERATIONS = ("set_limit", "clear_limit")
"""What ``POST /limits`` does, by ``do`` (the names ``authorize`` is asked about)."""


def _value(name: str, raw: str) -> int | Rate | None:
    """``none``, a whole number, or for a rate ``LIMIT/DURATION`` (``100/1m``); ``InvalidOption`` otherwise."""
    if raw.lower() == "none":
        return None
    if name in RATES:
        limit, _, per = raw.partition("/")
        try:
            return Rate(int(limit), parse_duration(per))
        except (ValueError, BadDuration):
            raise InvalidOption(f"{name} {raw!r} is not LIMIT/DURATION (e.g. 100/1m) or none") from None
    try:
        return int(raw)
    except ValueError:
        raise InvalidOption(f"{name} {raw!r} is not a whole number or none") from None


def read_change(do: str, form: Mapping[str, Any]) -> dict[str, Any]:
    """The checked change: ``kind``, ``name`` (empty to clear every override of the kind) and ``value``."""
    kind = forms.text(form, "kind", required=True, limit=200) or ""
    name = forms.text(form, "name", required=do == "set_limit", limit=40) or ""
    if name and name not in LIMIT_NAMES:
        raise InvalidOption(f"unknown limit {name!r}: limits are {', '.join(LIMIT_NAMES)}")
    value = forms.text(form, "value", required=do == "set_limit", limit=40) or ""
    if do == "set_limit":
        _value(name, value)  # checked now, parsed again when confirmed
    return {"kind": kind, "name": name, "value": value if do == "set_limit" else ""}


def sentence(do: str, change: Mapping[str, Any]) -> str:
    """What the change does, in words."""
    if do == "set_limit":
        return f"Set {change['name']} of kind {change['kind']} to {change['value']} (an override)"
    what = change["name"] or "every override"
    return f"Clear {what} of kind {change['kind']} (its declared value applies again)"


def apply(dashboard: Dashboard, do: str, change: Mapping[str, Any], actor: str) -> str:
    """Run the change in its own transaction; the page's message."""
    ops = Operations(dashboard.models, dashboard.tasks)
    if do == "set_limit":
        values: dict[str, Any] = {change["name"]: _value(change["name"], change["value"])}
        ops.set_limit(dashboard.engine, change["kind"], actor=actor, **values)
        return f"kind {change['kind']}: {change['name']} set to {change['value']}"
    names = (change["name"],) if change["name"] else ()
    gone = ops.clear_limit(dashboard.engine, change["kind"], *names, actor=actor)
    return f"kind {change['kind']}: cleared {', '.join(gone)}" if gone else f"kind {change['kind']}: no override"


def limits_of(dashboard: Dashboard, kind: str | None = None) -> list[LimitInfo]:
    found = Operations(dashboard.models, dashboard.tasks).limits(dashboard.engine)
    return [i for i in found if kind is None or i.kind == kind]


def routes(dashboard: Dashboard) -> list[Route]:
    """``GET /limits`` and ``POST /limits``, bound to ``dashboard``."""

    async def page(request: Request) -> Response:
        await dashboard.may_view(request)
        found = await run_in_threadpool(limits_of, dashboard)
        return dashboard.render(request, "limits.html", page="limits", limits=found, names=LIMIT_NAMES,
                                declared_known=bool(list(dashboard.tasks)))

    async def operate(request: Request) -> Response:
        form = await request.form()
        do = str(form.get("do") or "")
        if do not in OPERATIONS:
            raise HTTPException(400, f"unknown operation {do[:40]!r}: use one of {', '.join(OPERATIONS)}")
        dashboard.check_request(request, form, do)
        csrf = str(form.get("csrf"))
        try:
            if SELECTION_FIELD in form:  # the confirmation page's POST: the change is in its signed field
                confirmed = decode(dashboard.secret, csrf, form.get(SELECTION_FIELD))
                if confirmed.action != do:
                    raise BadConfirmation("was made for another operation")
                change = read_change(do, json.loads(confirmed.note))
            else:
                change = read_change(do, form)
        except BadConfirmation as exc:
            raise HTTPException(400, f"this confirmation {exc}: go back to the limits page and try again") from None
        except InvalidOption as exc:
            raise HTTPException(400, f"{do}: {exc}") from None
        await check_authorized(dashboard.authorize, request, do, [])
        if SELECTION_FIELD not in form:
            current = await run_in_threadpool(limits_of, dashboard, change["kind"])
            field = encode(dashboard.secret, csrf, do, json.dumps(change), {})
            return dashboard.render(request, "limit_confirm.html", page="limits", do=do, current=current,
                                    what=sentence(do, change), field_name=SELECTION_FIELD, selection=field)
        try:
            message = await run_in_threadpool(apply, dashboard, do, change, dashboard.actor(request))
        except VenturiError as exc:
            message = f"{do.replace('_', ' ')} refused: {exc}"
        return dashboard.back(request, dashboard.base(request) + "/limits", message)

    return [Route("/limits", page, name="limits"),
            Route("/limits", operate, methods=["POST"], name="limits-actions")]

