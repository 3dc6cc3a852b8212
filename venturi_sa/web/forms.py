"""The values an action form carries, read and checked before anything is written.

Each reader takes the submitted form and returns the typed value, or raises
``InvalidOption`` with a one-line reason naming the field; the route then
answers 400 and changes nothing.  Times follow the command line's rule: an
ISO 8601 time without an offset is UTC; a duration (``30m``, ``2h``,
``1h30m``, ``1d``) counts from when the action runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from venturi_sa.cli.durations import BadDuration, parse_duration
from venturi_sa.errors import InvalidOption
from venturi_sa.task import check_priority

PAYLOAD_LIMIT = 100_000
"""The most characters a payload typed into the job page may have."""


def text(form: Mapping[str, Any], name: str, *, required: bool = False, limit: int = 500) -> str | None:
    """The stripped text of field ``name`` (None when empty), at most ``limit`` characters."""
    value = str(form.get(name) or "").strip()
    if not value:
        if required:
            raise InvalidOption(f"{name} is required")
        return None
    if len(value) > limit or "\x00" in value:
        raise InvalidOption(f"{name} must be at most {limit} characters of text")
    return value


def priority(form: Mapping[str, Any]) -> int:
    """The ``priority`` field: 0 (high), 1 (normal) or 2 (low)."""
    raw = text(form, "priority", required=True) or ""
    try:
        value = int(raw)
    except ValueError:
        raise InvalidOption(f"priority must be 0 (HIGH), 1 (NORMAL) or 2 (LOW), got {raw!r}") from None
    return int(check_priority(value))


def when(form: Mapping[str, Any], name: str, *, required: bool = True) -> datetime | timedelta | None:
    """Field ``name`` as an aware time or a duration from now (see the module docstring)."""
    raw = text(form, name, required=required, limit=64)
    if raw is None:
        return None
    try:
        return parse_duration(raw)
    except BadDuration:
        pass
    try:
        moment = datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw)
    except ValueError:
        raise InvalidOption(f"{name} {raw!r} is neither a duration (30m, 2h, 1d) nor an ISO 8601 time "
                            "such as 2026-05-01T12:00:00Z") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def payload(form: Mapping[str, Any]) -> Any:
    """The ``payload`` field parsed as JSON (any value but null; the task's schema checks the rest)."""
    raw = str(form.get("payload") or "").strip()
    if not raw:
        raise InvalidOption("payload is required: type the whole new payload as JSON")
    if len(raw) > PAYLOAD_LIMIT:
        raise InvalidOption(f"payload must be at most {PAYLOAD_LIMIT} characters of JSON")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidOption(f"payload is not valid JSON: {exc}") from None
    if value is None:
        raise InvalidOption("payload must be a JSON value other than null")
    return value
