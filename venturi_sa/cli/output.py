"""Rendering results: aligned text tables for people, ``--json`` for scripts."""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, is_dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any

import click

from venturi_sa.cli.durations import format_duration

EMPTY = "-"


def jsonable(value: Any) -> Any:
    """``value`` with datetimes as ISO 8601, durations as seconds and enums as their values."""
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if is_dataclass(value) and not isinstance(value, type):
        return jsonable(asdict(value))
    return value


def emit_json(value: Any) -> None:
    """Print ``value`` as indented JSON on stdout."""
    click.echo(json.dumps(jsonable(value), indent=2, sort_keys=False))


def cell(value: Any) -> str:
    """One table cell: times in UTC to the second, durations short, JSON compact, text on one line."""
    if value is None:
        return EMPTY
    if isinstance(value, enum.Enum):
        return cell(value.value)
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc)
        return f"{value:%Y-%m-%d %H:%M:%S}"
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), default=str)
    return one_line(str(value))


def one_line(text: str) -> str:
    """``text`` on one line: its lines joined by `` | `` (a multi-line note must not break a table)."""
    if "\n" not in text and "\r" not in text:
        return text
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[str] = ()) -> str:
    """An aligned plain-text table; columns named in ``right`` are right-aligned (numbers)."""
    texts = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in texts)]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if h in right else v.ljust(w) for v, w, h in zip(values, widths, headers, strict=True)]
        return "  ".join(parts).rstrip()

    return "\n".join([line([h.upper() for h in headers]), *(line(r) for r in texts)])


def fields(pairs: Sequence[tuple[str, Any]]) -> str:
    """``label: value`` lines with the values aligned."""
    width = max((len(label) for label, _ in pairs), default=0)
    return "\n".join(f"{label + ':':<{width + 1}} {cell(value)}" for label, value in pairs)
