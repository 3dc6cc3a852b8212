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
PAYLOAD_DEPTH = 64
"""The deepest nesting of arrays and objects a payload typed into the job page may have."""
FURTHEST = timedelta(days=3650)
"""How far ahead "Run later" and pause ends may be (a delay, or a time)."""
EARLIEST = timedelta(days=36500)
"""How far back a time may be (an operation then says whether a past time is fine)."""


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
    far = f"{name} must be at most {FURTHEST.days} days ahead and {EARLIEST.days} days back"
    try:
        delay = parse_duration(raw)
    except BadDuration:
        pass
    except (OverflowError, ValueError):
        raise InvalidOption(far) from None
    else:
        if delay > FURTHEST:
            raise InvalidOption(far)
        return delay
    try:
        moment = datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw)
    except ValueError:
        raise InvalidOption(f"{name} {raw!r} is neither a duration (30m, 2h, 1d) nor an ISO 8601 time "
                            "such as 2026-05-01T12:00:00Z") from None
    moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
    try:
        near = -EARLIEST <= moment - datetime.now(timezone.utc) <= FURTHEST
    except OverflowError:
        near = False
    if not near:
        raise InvalidOption(far)
    return moment


def payload(form: Mapping[str, Any]) -> Any:
    """The ``payload`` field parsed as JSON (any value but null; the task's schema checks the rest)."""
    value = json_field(form, "payload", missing="payload is required: type the whole new payload as JSON")
    if value is None:
        raise InvalidOption("payload must be a JSON value other than null")
    return value


def json_field(form: Mapping[str, Any], name: str, *, missing: str | None = None) -> Any:
    """Field ``name`` parsed as JSON, at most PAYLOAD_LIMIT characters and PAYLOAD_DEPTH deep; empty: None,
    or ``InvalidOption(missing)`` when ``missing`` is given."""
    raw = str(form.get(name) or "").strip()
    if not raw:
        if missing is not None:
            raise InvalidOption(missing)
        return None
    if len(raw) > PAYLOAD_LIMIT:
        raise InvalidOption(f"{name} must be at most {PAYLOAD_LIMIT} characters of JSON")
    if _depth(raw) > PAYLOAD_DEPTH:
        raise InvalidOption(f"{name} nests deeper than {PAYLOAD_DEPTH} levels of arrays and objects")
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidOption(f"{name} is not valid JSON: {exc}") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise InvalidOption(f"{name} is not usable JSON: {exc}") from None


def _depth(raw: str) -> int:
    """The deepest bracket nesting of JSON text ``raw``, outside strings (read before parsing, no recursion)."""
    deepest = level = 0
    in_string = escaped = False
    for char in raw:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            level += 1
            deepest = max(deepest, level)
        elif char in "]}":
            level -= 1
    return deepest
