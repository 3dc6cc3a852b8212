"""Dangerous actions (kill, cancel: ``Action.danger``) are confirmed on the server before they act.

The first POST of a dangerous action changes nothing: it resolves what would
change (the selected ids, or every job matching the filter, up to
``BULK_MOST``), asks ``authorize`` about those ids, reads each one's kind and
status, and answers a confirmation page naming the count, the kinds and the
filter.  That page's form carries the ids and a code, an HMAC under the
dashboard's secret of the action, the ids, the note and the page's CSRF
token: only that form, submitted from the browser it was shown to, acts, and
only on exactly those ids.  The confirmed POST checks every id again
before changing any (an unknown one is reported, not attempted), then acts on
each in its own transaction (a job whose status no longer allows it is
refused by the action, unchanged) and answers a page with each job's result.
"""

from __future__ import annotations

import hmac
from collections import Counter
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from venturi_sa.web import queries
from venturi_sa.web.actions import Action, ActionContext, Outcome, apply_each
from venturi_sa.web.app import Dashboard
from venturi_sa.web.security import check_authorized, csrf_token, sign

CONFIRM_FIELD = "confirm"


def code(dashboard: Dashboard, request: Request, action: Action, ids: list[str], note: str | None) -> str:
    """The confirmation code of acting with ``action`` on ``ids`` from this browser (see the module docstring)."""
    return sign(dashboard.secret, "confirm", csrf_token(request, dashboard.secret), action.name, note or "", *ids)


async def confirmed(dashboard: Dashboard, request: Request, form: FormData, action: Action, ctx: ActionContext,
                    ids: list[str], scope: str) -> Response:
    """The confirmation page for ``action`` on ``ids`` (or the filter's matches), or, confirmed, its results."""
    from venturi_sa.web import routes

    given: dict[str, str] = {}
    truncated = False
    if scope == "matching":
        flt, given = routes.parse_filter(form, routes._now())
        batches = queries.matching_ids(dashboard.models, dashboard.engine, flt, action.statuses,
                                       routes.BULK_BATCH, routes.BULK_MOST + 1)
        ids = [i for batch in await run_in_threadpool(list, batches) for i in batch]
        truncated = len(ids) > routes.BULK_MOST
        ids = ids[:routes.BULK_MOST]
    await check_authorized(dashboard.authorize, request, action.name, ids)
    found = await run_in_threadpool(queries.selection, dashboard.models, dashboard.engine, ids)
    expected = code(dashboard, request, action, ids, ctx.note)
    submitted = form.get(CONFIRM_FIELD)
    if submitted is None or scope == "matching":
        return _ask(dashboard, request, action, ids, found, given, truncated, ctx.note, expected)
    if not isinstance(submitted, str) or not hmac.compare_digest(submitted, expected):
        raise HTTPException(400, f"this {action.label} confirmation does not match what was submitted: "
                                 "start again from the jobs page")
    outcome = Outcome(skipped={i: f"no job with id {i}" for i in ids if i not in found})
    eligible = [i for i in ids if i not in outcome.skipped]
    outcome.merge(await run_in_threadpool(apply_each, action, ctx, eligible))
    return _results(dashboard, request, action, ids, found, outcome)


def _ask(dashboard: Dashboard, request: Request, action: Action, ids: list[str],
         found: dict[str, tuple[str, str]], given: dict[str, str], truncated: bool, note: str | None,
         expected: str) -> Response:
    applicable = [i for i in ids if i in found and found[i][1] in action.statuses]
    kinds = Counter(found[i][0] for i in applicable)
    return dashboard.render(request, "confirm.html", page="jobs", action=action, ids=ids, applicable=applicable,
                            kinds=sorted(kinds.items()), given=given, truncated=truncated, note=note or "",
                            code=expected, most=len(ids), others=len(ids) - len(applicable))


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
    from venturi_sa.web.routes import _summary

    return dashboard.render(request, "results.html", page="jobs", action=action, rows=rows,
                            msg=_summary(action.label, outcome), failed=outcome.failed)
