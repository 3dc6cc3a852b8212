"""Dangerous actions (kill, cancel: ``Action.danger``) are confirmed on the server before they act.

The first POST of a dangerous action changes nothing: it resolves what would
change (the selected ids, or every job matching the filter, up to
``BULK_MOST``), asks ``authorize`` about those ids, reads each one's kind and
status, and answers a confirmation page naming the count, the kinds and the
filter.  That page's form carries one field, a signed and expiring record of
the action, the note and each id with the status it had
(:mod:`venturi_sa.web.confirm_token`; HMAC under the dashboard's secret,
bound to the page's CSRF token): only that form, submitted from the browser
it was shown to within :data:`~venturi_sa.web.confirm_token.CONFIRM_SECONDS`,
acts, and only on exactly those ids.  The confirmed POST asks ``authorize``
again, reads every id's status again before changing any, and leaves out,
reported, each job that is gone or whose status changed since the page was
drawn; then it acts on each of the others in its own transaction (a job whose
status changes meanwhile is refused by the action, unchanged) and answers a
page with each job's result.  A crash mid-way leaves the jobs done so far done.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from venturi_sa.web import page_inputs, queries
from venturi_sa.web.actions import BULK_BATCH, BULK_MOST, Action, ActionContext, Outcome, apply_each, summary
from venturi_sa.web.app import Dashboard
from venturi_sa.web.confirm_token import SELECTION_FIELD, BadConfirmation, decode, encode
from venturi_sa.web.security import check_authorized, csrf_token

CONFIRMED = "confirmed"
"""The scope of a confirmation page's POST (``do=kill:confirmed``): its ids are in the signed field."""


async def confirmed(dashboard: Dashboard, request: Request, form: FormData, action: Action, ctx: ActionContext,
                    ids: list[str], scope: str) -> Response:
    """The confirmation page for ``action`` on ``ids`` (or the filter's matches), or, confirmed, its results."""
    if scope == CONFIRMED:
        return await _act(dashboard, request, form, action, ctx)
    given: dict[str, str] = {}
    truncated = False
    if scope == "matching":
        flt, given = page_inputs.parse_filter(form, datetime.now(timezone.utc))
        batches = queries.matching_ids(dashboard.models, dashboard.engine, flt, action.statuses,
                                       BULK_BATCH, BULK_MOST + 1)
        ids = [i for batch in await run_in_threadpool(list, batches) for i in batch]
        truncated = len(ids) > BULK_MOST
        ids = ids[:BULK_MOST]
    await check_authorized(dashboard.authorize, request, action.name, ids)
    found = await run_in_threadpool(queries.selection, dashboard.models, dashboard.engine, ids)
    statuses = {i: found[i][1] if i in found else None for i in ids}
    field = encode(dashboard.secret, csrf_token(request, dashboard.secret), action.name, ctx.note or "", statuses)
    applicable = [i for i in ids if i in found and found[i][1] in action.statuses]
    kinds = Counter(found[i][0] for i in applicable)
    return dashboard.render(request, "confirm.html", page="jobs", action=action, ids=ids, applicable=applicable,
                            kinds=sorted(kinds.items()), given=given, truncated=truncated, note=ctx.note or "",
                            selection=field, field_name=SELECTION_FIELD, scope=CONFIRMED, most=len(ids),
                            others=len(ids) - len(applicable))


async def _act(dashboard: Dashboard, request: Request, form: FormData, action: Action,
               ctx: ActionContext) -> Response:
    """The confirmed POST: exactly the confirmed ids, less those gone or changed since, each reported."""
    try:
        record = decode(dashboard.secret, csrf_token(request, dashboard.secret), form.get(SELECTION_FIELD))
    except BadConfirmation as exc:
        raise HTTPException(400, f"this {action.label} confirmation {exc}: start again from the jobs page") from None
    if record.action != action.name or record.note != (ctx.note or ""):
        raise HTTPException(400, f"this {action.label} confirmation does not match what was submitted: "
                                 "start again from the jobs page")
    ids = record.ids
    await check_authorized(dashboard.authorize, request, action.name, ids)
    found = await run_in_threadpool(queries.selection, dashboard.models, dashboard.engine, ids)
    outcome = Outcome()
    for job_id, was in record.statuses.items():
        now = found[job_id][1] if job_id in found else None
        if now is None:
            outcome.skipped[job_id] = f"no job with id {job_id}" + (f" (it was {was} when confirmed)" if was else "")
        elif now != was:
            outcome.skipped[job_id] = (f"job {job_id} changed since the confirmation (was {was or 'unknown'}, "
                                       f"now {now}): left out")
    eligible = [i for i in ids if i not in outcome.skipped]
    outcome.merge(await run_in_threadpool(apply_each, action, ctx, eligible))
    return _results(dashboard, request, action, ids, found, outcome)


def _results(dashboard: Dashboard, request: Request, action: Action, ids: list[str],
             found: dict[str, tuple[str, str]], outcome: Outcome) -> Response:
    rows: list[dict[str, Any]] = []
    for job_id in ids:
        if job_id in outcome.applied:
            result = "changed"
        elif job_id in outcome.skipped:
            result = f"refused: {outcome.skipped[job_id]}"
        else:
            result = "not attempted (the database failed first)"
        rows.append({"id": job_id, "kind": found.get(job_id, ("?", ""))[0], "result": result})
    return dashboard.render(request, "results.html", page="jobs", action=action, rows=rows,
                            msg=summary(action.label, outcome), failed=outcome.failed)
