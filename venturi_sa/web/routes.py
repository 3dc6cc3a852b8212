"""The dashboard's pages, fragments, actions and event stream.

GET pages read (each in one or two short transactions, see
:mod:`venturi_sa.web.queries`) after ``authorize(request, "view", ...)`` allows
it; fragments are the live parts of a page, re-read when the event stream says
the queue changed, and answer 204 (no body) when the browser already has the
same one (``If-None-Match``).  ``POST /actions`` is the only state-changing
route for jobs: it passes :meth:`Dashboard.guard` first, checks every id, then
applies the action to the selected ids, or to every job matching the
submitted filter; a dangerous action (kill, cancel) first answers a
confirmation page (:mod:`venturi_sa.web.confirm`).  Bad input answers 400, an
unknown job 404, the database away 503 (a page that retries), a statement
cancelled by the dashboard's ``query_timeout`` (a lock held on the jobs table)
503 "busy" with ``Retry-After``, and a statement the database role may not
run 403.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlencode

import sqlalchemy as sa
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from venturi_sa.errors import InvalidOption
from venturi_sa.ops.history import encode_cursor
from venturi_sa.ops.job_sections import Starts
from venturi_sa.states import STATUSES
from venturi_sa.storage.dashboard import JobFilter, JobPageParams
from venturi_sa.storage.faults import is_insufficient_privilege
from venturi_sa.storage.query_timeouts import is_busy, query_timeout
from venturi_sa.web import confirm, forms, pauses, queries
from venturi_sa.web.actions import BULK_BATCH, BULK_MOST, Action, ActionContext, Outcome, apply_each, summary
from venturi_sa.web.app import Dashboard
from venturi_sa.web.job_steps_view import steps_timeline
from venturi_sa.web.page_inputs import (
    SECTIONS,
    WINDOWS,
    after_cursor,
    bad,
    check_job_id,
    parse_filter,
    printable,
    section_starts,
)
from venturi_sa.web.security import Refused, check_authorized

PAGE_SIZE = 50
FORM_FIELDS = 50
"""Form fields an action may carry besides its ids (csrf, do, note, the filter, the action's own)."""
SORTS = ("newest", "oldest")
"""The jobs list's orders: by creation time, the only order ``_jobs_created`` walks by keyset."""
RETRY_SECONDS = 5
"""How soon the "database unavailable" page reloads itself."""


def _now() -> datetime:
    return datetime.now(timezone.utc)


Endpoint = Callable[[Request], Awaitable[Response]]
"""A route handler."""


def routes(dashboard: Dashboard) -> list[Route]:
    """Every built-in route, bound to ``dashboard``."""

    def paired(read: Callable[[Request], dict[str, Any]], template: str, body: str,
               page: str) -> tuple[Endpoint, Endpoint]:
        """A page and its live fragment (re-read when the queue changes): both draw what ``read`` returns."""

        async def full(request: Request) -> Response:
            await dashboard.may_view(request, _viewed_ids(request))
            data = await run_in_threadpool(read, request)
            return dashboard.render(request, template, page=page, **data)

        async def fragment(request: Request) -> Response:
            await dashboard.may_view(request, _viewed_ids(request))
            data = await run_in_threadpool(read, request)
            return _unless_unchanged(request, dashboard.render(request, body, **data))

        return full, fragment

    def overview_data(request: Request) -> dict[str, Any]:
        window = request.query_params.get("window", "hour")
        if window not in queries.WINDOWS:
            raise bad(f"invalid chart window {window!r}: use hour or day")
        return {"view": queries.overview(dashboard.models, dashboard.engine, window)}

    def jobs_data(request: Request) -> dict[str, Any]:
        now = _now()
        flt, given = parse_filter(request.query_params, now)
        sort = printable("sort", request.query_params.get("sort") or SORTS[0])
        if sort not in SORTS:
            raise bad(f"invalid sort {sort!r}: the list sorts by creation time only, {' or '.join(SORTS)} "
                       "(no other column has an index to page through without OFFSET)")
        flip = urlencode({**given, **({} if sort == "oldest" else {"sort": "oldest"})})
        if sort != SORTS[0]:
            given["sort"] = sort
        after = after_cursor(request.query_params)
        page = queries.jobs(dashboard.models, dashboard.engine,
                            JobPageParams(filter=flt, limit=PAGE_SIZE, after=after, oldest_first=sort == "oldest",
                                          errors=True))
        more = None
        if page.next_after is not None:
            more = urlencode({**given, "after": encode_cursor(*page.next_after)})
        return {"jobs": page, "given": given, "more": more, "first": after is None, "sort": sort, "flip": flip,
                "query": urlencode(given), "upto": now.isoformat(), "statuses": STATUSES,
                "windows": list(WINDOWS)}

    def job_data(request: Request) -> dict[str, Any]:
        job_id = request.path_params["job_id"]
        starts, shown = section_starts(request.query_params)
        try:
            found = queries.detail_page(dashboard.models, dashboard.engine, job_id, starts, dashboard.tasks)
        except InvalidOption as exc:
            raise bad(str(exc)) from None
        if found is None:
            raise HTTPException(404, f"no job with id {job_id!r} in queue {dashboard.prefix!r}")
        sections = found.sections
        steps = steps_timeline([r.entry for r in found.runs], sections.steps.items)
        pages = {name: urlencode({**shown, name: getattr(sections, name).next})
                 for name in SECTIONS if getattr(sections, name).next is not None}
        firsts = {name: urlencode({k: v for k, v in shown.items() if k != name}) for name in shown}
        return {"view": found, "steps": steps, "sections": sections, "pages": pages, "firsts": firsts,
                "query": urlencode(shown)}

    async def job_json(request: Request) -> Response:
        """One JSON field of a job in full (what its page shows truncated), as a download."""
        job_id = request.path_params["job_id"]
        await dashboard.may_view(request, _viewed_ids(request))
        field = request.path_params["field"]
        kind, _, entry = field.partition("-")
        starts = Starts(limit=1, journal=entry) if kind == "attachment" and entry.isdigit() else None
        found = await run_in_threadpool(queries.detail, dashboard.models, dashboard.engine, job_id,
                                        starts or queries.SECTION_STARTS)
        if found is None:
            raise HTTPException(404, f"no job with id {job_id!r} in queue {dashboard.prefix!r}")
        value = _json_field(found, field)
        text = dashboard.pretty(value, found.job.kind, field.partition("-")[0])
        return Response(text, media_type="application/json", headers={
            "Content-Disposition": f'attachment; filename="{job_id}-{field}.json"', "Cache-Control": "no-store"})

    def workers_data(request: Request) -> dict[str, Any]:
        return {"view": queries.workers(dashboard.models, dashboard.engine)}

    def control_data(request: Request) -> dict[str, Any]:
        return {"view": queries.control(dashboard.models, dashboard.engine, dashboard.tasks)}

    overview, overview_fragment = paired(overview_data, "overview.html", "overview_body.html", "overview")
    jobs, jobs_fragment = paired(jobs_data, "jobs.html", "jobs_rows.html", "jobs")
    job, job_fragment = paired(job_data, "job.html", "job_body.html", "jobs")
    workers, workers_fragment = paired(workers_data, "workers.html", "workers_body.html", "workers")
    control, control_fragment = paired(control_data, "control.html", "control_body.html", "control")

    async def act(request: Request) -> Response:
        form = await request.form(max_fields=BULK_MOST + FORM_FIELDS)
        name, _, scope = str(form.get("do") or "").partition(":")
        action = dashboard.actions.get(name)
        if action is None or scope not in ("selected", "matching", *((confirm.CONFIRMED,) if action.danger else ())):
            raise bad(f"unknown action {str(form.get('do'))[:80]!r}")
        dashboard.check_request(request, form, action.name)  # before any read of the form or the jobs
        if scope == "matching" and not action.bulk:
            raise bad(f"{action.label} applies to one job at a time, from the job's page")
        ids = _selected(action, form) if scope == "selected" else []  # a confirmation's are in its signed field
        ctx = _context(request, action, form)
        if action.danger:
            return await confirm.confirmed(dashboard, request, form, action, ctx, ids, scope)
        if scope == "selected":
            await check_authorized(dashboard.authorize, request, action.name, ids)
            found = await run_in_threadpool(queries.selection, dashboard.models, dashboard.engine, ids)
            outcome = Outcome(skipped={i: f"no job with id {i}" for i in ids if i not in found})
            outcome.merge(await run_in_threadpool(apply_each, action, ctx, [i for i in ids if i in found]))
        else:
            flt, _ = parse_filter(form, _now())
            outcome = await _apply_matching(request, action, ctx, flt)
        return dashboard.back(request, str(form.get("next") or ""), summary(action.label, outcome))

    def _context(request: Request, action: Action, form: Any) -> ActionContext:
        """The action's context; its own fields are read (and checked: 400 if bad) here, before any job."""
        try:
            note = forms.text(form, "note")
            values = action.read(form)
        except InvalidOption as exc:
            raise bad(f"{action.label}: {exc}") from None
        return ActionContext(models=dashboard.models, engine=dashboard.engine, actor=dashboard.actor(request),
                             note=note, values=values, registry=dashboard.tasks)

    async def _apply_matching(request: Request, action: Action, ctx: ActionContext, flt: JobFilter) -> Outcome:
        """Walk every matching job in batches; ``authorize`` is asked for each batch before it runs."""
        total = Outcome()
        batches = queries.matching_ids(dashboard.models, dashboard.engine, flt, action.statuses,
                                       BULK_BATCH, BULK_MOST + 1)
        while True:
            ids = await run_in_threadpool(next, batches, None)
            if ids is None:
                return total
            if len(total.applied) + len(total.skipped) + len(ids) > BULK_MOST:
                ids = ids[:BULK_MOST - len(total.applied) - len(total.skipped)]
                total.truncated = True
            if ids:
                await check_authorized(dashboard.authorize, request, action.name, ids)
                total.merge(await run_in_threadpool(apply_each, action, ctx, ids))
            if total.truncated or total.failed:
                return total

    async def events(request: Request) -> Response:
        await dashboard.may_view(request)
        return StreamingResponse(dashboard.feed.events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    return [
        Route("/", overview, name="overview"),
        Route("/fragment/overview", overview_fragment),
        Route("/jobs", jobs, name="jobs"),
        Route("/fragment/jobs", jobs_fragment),
        Route("/jobs/{job_id}", job, name="job"),
        Route("/jobs/{job_id}/json/{field}", job_json, name="job-json"),
        Route("/fragment/jobs/{job_id}", job_fragment),
        Route("/workers", workers, name="workers"),
        Route("/fragment/workers", workers_fragment),
        Route("/schedules", control, name="control"),
        Route("/fragment/schedules", control_fragment),
        Route("/schedules", pauses.endpoint(dashboard), methods=["POST"], name="control-actions"),
        Route("/actions", act, methods=["POST"], name="actions"),
        Route("/events", events, name="events"),
    ]


def _selected(action: Action, form: Any) -> list[str]:
    """The checked job ids: at least one, at most :data:`BULK_MOST` (one for a job-page-only action)."""
    ids = [check_job_id(str(i)) for i in form.getlist("ids")]  # every id checked before any changes
    if not ids:
        raise bad("no jobs selected")
    ids = list(dict.fromkeys(ids))
    if not action.bulk and len(ids) > 1:
        raise bad(f"{action.label} applies to one job at a time")
    if len(ids) > BULK_MOST:
        raise bad(f"at most {BULK_MOST} jobs per action: select fewer, or act on all matching a filter")
    return ids


def _viewed_ids(request: Request) -> list[str]:
    """The job a page or fragment shows (its id checked: 400 if it cannot be one), else none."""
    job_id = request.path_params.get("job_id")
    return [check_job_id(job_id)] if job_id is not None else []


def _unless_unchanged(request: Request, response: Response) -> Response:
    """``response`` with an ETag of its body, or 204 and no body when the browser has it already."""
    tag = '"' + hashlib.sha256(bytes(response.body)).hexdigest()[:32] + '"'
    if request.headers.get("if-none-match") == tag:
        return Response(status_code=204, headers={"ETag": tag, "Cache-Control": "no-store"})
    response.headers["ETag"] = tag
    return response


def _json_field(found: queries.Detail, field: str) -> Any:
    """``payload``, ``carry`` or ``attachment-<journal id>`` of a job (404 if it has no such field)."""
    if field in ("payload", "carry"):
        return getattr(found.job, field)
    kind, _, entry = field.partition("-")
    for run in found.runs:
        if kind == "attachment" and str(run.entry.id) == entry and run.entry.attachment is not None:
            return run.entry.attachment
    raise HTTPException(404, f"job {found.job.id} has no field {field[:40]!r}")


def handlers(dashboard: Dashboard) -> dict[Any, Any]:
    """Refusals, HTTP errors and an unreachable database as a page in the dashboard's layout."""

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Refused)
        return dashboard.render(request, "error.html", status_code=exc.status, message=exc.reason)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return dashboard.render(request, "error.html", status_code=exc.status_code, message=exc.detail)

    async def unavailable(request: Request, exc: Exception) -> Response:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0][:200]
        busy = is_busy(exc)
        response = dashboard.render(request, "busy.html" if busy else "unavailable.html", status_code=503,
                                    message=reason, retry=RETRY_SECONDS, timeout=query_timeout(dashboard.engine))
        response.headers["Retry-After"] = str(RETRY_SECONDS)
        return response

    async def refused_by_database(request: Request, exc: Exception) -> Response:
        return dashboard.render(request, "error.html", status_code=400,
                                message="the database refused this input: check the values and try again")

    async def not_permitted(request: Request, exc: Exception) -> Response:
        if not is_insufficient_privilege(exc):
            raise exc
        return dashboard.render(request, "error.html", status_code=403, message=(
            "the dashboard's database role may not do this (" + str(getattr(exc, "orig", None) or exc)
            .strip().splitlines()[0][:200] + "): see docs/security.md"))

    return {Refused: refused, HTTPException: http_error, sa.exc.OperationalError: unavailable,
            sa.exc.ProgrammingError: not_permitted,
            sa.exc.InterfaceError: unavailable, sa.exc.TimeoutError: unavailable,
            sa.exc.DataError: refused_by_database, RecursionError: refused_by_database}

