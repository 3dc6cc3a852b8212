"""Durations on the command line: ``"7d"``, ``"12h"``, ``"30m"``, ``"90s"``, ``"1h30m"``, ``"2w"``."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING

import click

UNITS = {"w": "weeks", "d": "days", "h": "hours", "m": "minutes", "s": "seconds"}
_PART = re.compile(r"(\d+)([wdhms])")
_WHOLE = re.compile(r"(?:\d+[wdhms])+")


class BadDuration(ValueError):
    """A duration string that is not one or more ``<integer><unit>`` parts."""


def parse_duration(text: str) -> timedelta:
    """Parse ``text`` into a non-negative ``timedelta``; raise :class:`BadDuration` otherwise.

    Units: w (weeks), d (days), h (hours), m (minutes), s (seconds); parts may
    be combined in any order (``"1h30m"``).  Whitespace and case are ignored.
    """
    compact = text.strip().lower().replace(" ", "")
    if not _WHOLE.fullmatch(compact):
        raise BadDuration(
            f"invalid duration {text!r}: use a number and a unit, e.g. 7d, 12h, 30m, 90s or 1h30m "
            "(units: w, d, h, m, s)"
        )
    total = timedelta()
    for amount, unit in _PART.findall(compact):
        total += timedelta(**{UNITS[unit]: int(amount)})
    return total


def format_duration(value: timedelta) -> str:
    """A short human form of ``value``: ``"2d 3h"``, ``"4m 10s"``, ``"0.4s"``."""
    seconds = value.total_seconds()
    if seconds < 60:
        return f"{seconds:.0f}s" if seconds >= 10 or seconds.is_integer() else f"{seconds:.1f}s"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    shown = [f"{n}{u}" for n, u in parts if n][:2]
    return " ".join(shown)


if TYPE_CHECKING:
    _ParamType = click.ParamType[timedelta]
else:
    _ParamType = click.ParamType


class Duration(_ParamType):
    """A click parameter type for durations (see :func:`parse_duration`)."""

    name = "duration"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> timedelta:
        if isinstance(value, timedelta):
            return value
        try:
            return parse_duration(str(value))
        except BadDuration as exc:
            self.fail(str(exc), param, ctx)
