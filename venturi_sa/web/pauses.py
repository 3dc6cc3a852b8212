"""The Schedules & pauses page's operations: pause or resume a kind, pause, resume or run a schedule now.

``POST /schedules`` with ``do`` one of :data:`OPERATIONS` passes the same
checks as every action (read-only mode, the CSRF token, then
``authorize(request, do, [])``: these act on a kind or a schedule, not on
jobs, so the hook gets no job ids; it may read the form, ``kind`` or
``name``, with ``await request.form()``), then runs the operation in its own
short transaction through the queue's operations
(:class:`venturi_sa.ops.face.Operations`): ``pause``/``resume`` (recorded with
the actor in ``<prefix>_pauses``), ``pause_schedule``/``resume_schedule`` (the
actor logged) and ``run_schedule_now`` (one job outside the schedule's timing,
its next fire time unchanged).
A refused operation (kind not paused, no such schedule, ``until`` in the past)
changes nothing and comes back as the page's message.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from venturi_sa.errors import InvalidOption, VenturiError
from venturi_sa.ops.face import Operations
from venturi_sa.web import forms
from venturi_sa.web.app import Dashboard
from venturi_sa.web.security import check_authorized

log = logging.getLogger("venturi.web")

Operation = Callable[[Dashboard, Mapping[str, Any], str], str]
"""``(dashboard, checked form values, actor) -> message``; raises ``VenturiError`` when refused."""


def _ops(dashboard: Dashboard) -> Operations:
    return Operations(dashboard.models, dashboard.tasks)


def _pause_kind(dashboard: Dashboard, values: Mapping[str, Any], actor: str) -> str:
    until = values["until"]
    timing = {"delay": until} if isinstance(until, timedelta) else {"until": until}
    done = _ops(dashboard).pause(dashboard.engine, values["kind"], reason=values["reason"], actor=actor,
                                 **timing)
    ends = f" until {done.resume_at:%Y-%m-%d %H:%M:%S %Z}" if done.resume_at else " until resumed"
    return f"kind {done.kind} paused{ends}"


def _resume_kind(dashboard: Dashboard, values: Mapping[str, Any], actor: str) -> str:
    done = _ops(dashboard).resume(dashboard.engine, values["kind"], actor=actor)
    return f"kind {done.kind} resumed"


def _schedule(paused: bool) -> Operation:
    def operate(dashboard: Dashboard, values: Mapping[str, Any], actor: str) -> str:
        ops = _ops(dashboard)
        (ops.pause_schedule if paused else ops.resume_schedule)(dashboard.engine, values["name"], actor=actor)
        verb = "paused" if paused else "resumed"
        # the schedule row records no actor; the log lines are the record of who did it.
        log.info("schedule %r of queue %r %s by %s", values["name"], dashboard.prefix, verb, actor)
        return f"schedule {values['name']} {verb}"

    return operate


def _run_schedule(dashboard: Dashboard, values: Mapping[str, Any], actor: str) -> str:
    job_id = _ops(dashboard).run_schedule_now(dashboard.engine, values["name"])
    log.info("schedule %r of queue %r run now by %s: job %s", values["name"], dashboard.prefix, actor, job_id)
    return f"schedule {values['name']} fired now: job {job_id}"


def _kind_form(form: Mapping[str, Any]) -> dict[str, Any]:
    return {"kind": forms.text(form, "kind", required=True, limit=200)}


OPERATIONS: dict[str, tuple[Operation, Callable[[Mapping[str, Any]], dict[str, Any]]]] = {
    "pause_kind": (_pause_kind, lambda form: {**_kind_form(form), "reason": forms.text(form, "reason"),
                                              "until": forms.when(form, "until", required=False)}),
    "resume_kind": (_resume_kind, _kind_form),
    "pause_schedule": (_schedule(True), lambda form: {"name": forms.text(form, "name", required=True)}),
    "resume_schedule": (_schedule(False), lambda form: {"name": forms.text(form, "name", required=True)}),
    "run_schedule": (_run_schedule, lambda form: {"name": forms.text(form, "name", required=True)}),
}
"""What ``POST /schedules`` does, by ``do``: the operation and the reader of its form fields."""


def endpoint(dashboard: Dashboard) -> Callable[[Request], Awaitable[Response]]:
    """The ``POST /schedules`` handler bound to ``dashboard``."""
    async def operate(request: Request) -> Response:
        form = await request.form()
        do = str(form.get("do") or "")
        if do not in OPERATIONS:
            raise HTTPException(400, f"unknown operation {do!r}: use one of {', '.join(OPERATIONS)}")
        dashboard.check_request(request, form, do)
        run, read = OPERATIONS[do]
        try:
            values = read(form)
        except InvalidOption as exc:
            raise HTTPException(400, f"{do}: {exc}") from None
        await check_authorized(dashboard.authorize, request, do, [])
        try:
            message = await run_in_threadpool(run, dashboard, values, dashboard.actor(request))
        except VenturiError as exc:
            message = f"{do.replace('_', ' ')} refused: {exc}"
        return dashboard.back(request, dashboard.base(request) + "/schedules", message)

    return operate
