"""The dashboard's URL and form inputs that select what a page shows, read and checked.

Each reader returns the typed value or raises a 400 ``HTTPException`` naming
what is wrong, before anything is read from the database: the job filter,
the list's keyset cursor, a job id, and where a job page's paged lists start.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from starlette.exceptions import HTTPException

from venturi_sa.errors import InvalidOption
from venturi_sa.ops.history import decode_cursor
from venturi_sa.ops.job_sections import Starts
from venturi_sa.states import STATUSES
from venturi_sa.storage.dashboard import JobFilter
from venturi_sa.web import queries

WINDOWS = {"15m": timedelta(minutes=15), "1h": timedelta(hours=1), "24h": timedelta(days=1),
           "7d": timedelta(days=7)}
TEXT_LIMIT = 200
ID_LIMIT = 128
"""The longest job id the dashboard looks up (ids are 26-character ULIDs)."""


def bad(message: str) -> HTTPException:
    return HTTPException(400, message)


def printable(name: str, value: str) -> str:
    """``value`` unless it holds a NUL or another control character (400 naming ``name``)."""
    if not value.isprintable():
        raise bad(f"{name} must be printable text (no NUL or control characters)")
    return value


def check_job_id(job_id: str) -> str:
    """``job_id`` when it can be a job's id: printable, at most :data:`ID_LIMIT` characters (else 400)."""
    if not job_id or len(job_id) > ID_LIMIT or not job_id.isprintable():
        raise bad(f"invalid job id {job_id[:ID_LIMIT]!r}: ids are printable text of at most {ID_LIMIT} characters")
    return job_id


def parse_filter(values: Any, now: datetime) -> tuple[JobFilter, dict[str, str]]:
    """The job filter in ``values`` (query or form), and its fields as given (for links and forms)."""
    for name in ("status", "window", "kind", "q", "upto"):
        printable(name, str(values.get(name) or ""))
    status = (values.get("status") or "").strip()
    if status and status not in STATUSES:
        raise bad(f"invalid status {status!r}: use one of {', '.join(STATUSES)}")
    window = (values.get("window") or "").strip()
    if window and window not in WINDOWS:
        raise bad(f"invalid window {window!r}: use one of {', '.join(WINDOWS)}")
    kind = (values.get("kind") or "").strip()
    text = (values.get("q") or "").strip()
    if len(kind) > TEXT_LIMIT or len(text) > TEXT_LIMIT:
        raise bad(f"kind and text filters are limited to {TEXT_LIMIT} characters")
    upto = (values.get("upto") or "").strip()
    before = None
    if upto:
        try:
            before = datetime.fromisoformat(upto)
        except ValueError:
            raise bad(f"invalid upto time {upto!r}") from None
        if before.tzinfo is None:
            raise bad("upto must carry a time zone")
    flt = JobFilter(statuses=(status,) if status else (), kind=kind or None, text=text or None,
                    created_after=now - WINDOWS[window] if window else None, created_before=before)
    given = {k: v for k, v in (("status", status), ("kind", kind), ("window", window), ("q", text)) if v}
    return flt, given


def after_cursor(values: Any) -> tuple[datetime, str] | None:
    cursor = values.get("after")
    if not cursor:
        return None
    printable("after", cursor)
    try:
        return decode_cursor(cursor)
    except InvalidOption as exc:
        raise bad(str(exc)) from None



SECTIONS = ("journal", "parents", "dependents", "steps")
"""A job page's paged lists; each takes its page's cursor as a query parameter of its name."""


def section_starts(values: Any) -> tuple[Starts, dict[str, str]]:
    """Where each of a job page's lists starts (the cursors in the query), and those given."""
    shown = {name: printable(name, str(values.get(name))) for name in SECTIONS if values.get(name)}
    if any(len(v) > ID_LIMIT * 2 for v in shown.values()):
        raise bad("invalid page cursor: pass back the one a page gave")
    return Starts(limit=queries.SECTION_STARTS.limit, journal=shown.get("journal"), parents=shown.get("parents"),
                  dependents=shown.get("dependents"), steps=shown.get("steps")), shown
