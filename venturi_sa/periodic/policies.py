"""What a due schedule fires: the catch-up policy (missed fire times) and the overlap policy.

**Catch-up** decides among the fire times that are due, from the schedule's
stored next fire time up to the database clock now:

* ``"latest"`` (the default): the most recent one fires, however late; the
  older ones are skipped.  After any downtime: one run, never a backfill.
* ``"skip"``: the most recent one fires only if the clock passed it at most
  :data:`SKIP_GRACE` ago; otherwise nothing fires.  Missed runs stay missed.
* ``"all_within(window)"``: every due fire time no older than ``window`` fires,
  oldest first (at most :data:`BATCH` per transaction; the rest stay due for
  the next one); older ones are skipped.  ``window`` is like ``"1h"``,
  ``"30m"``, ``"2d"``, ``"90s"`` or a ``timedelta``
  (``catch_up=all_within(timedelta(hours=6))``).

**Overlap** applies when the job of the schedule's previous fire is still
``pending`` or ``claimed``: ``"allow"`` fires anyway; ``"skip"`` skips the fire
time (counted as skipped); ``"queue"`` leaves it due and fires it once the
previous job has finished.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from venturi_sa.errors import InvalidOption
from venturi_sa.periodic.timing import Timing, at_or_after

SKIP_GRACE = timedelta(minutes=1)
BATCH = 100
OVERLAPS = ("allow", "skip", "queue")
_WINDOW = re.compile(r"all_within\((.+)\)")
_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def all_within(window: timedelta) -> str:
    """The catch-up policy firing every missed fire time at most ``window`` old."""
    if not isinstance(window, timedelta) or window <= timedelta(0):
        raise InvalidOption(f"all_within() takes a positive timedelta, got {window!r}")
    return f"all_within({int(window.total_seconds())}s)"


def _duration(text: str) -> timedelta | None:
    match = _DURATION.fullmatch(text.strip())
    if not match or not any(match.groups()):
        return None
    d, h, m, s = (int(g) if g else 0 for g in match.groups())
    value = timedelta(days=d, hours=h, minutes=m, seconds=s)
    return value if value > timedelta(0) else None


@dataclass(frozen=True)
class CatchUp:
    """A parsed catch-up policy; ``window`` only for ``all_within``."""

    how: str
    window: timedelta | None = None

    @property
    def spec(self) -> str:
        if self.window is None:
            return self.how
        return f"all_within({int(self.window.total_seconds())}s)"


def parse_catch_up(value: object) -> CatchUp:
    """``"skip"``, ``"latest"`` or ``"all_within(<duration>)"``; ``InvalidOption`` otherwise."""
    if value in ("skip", "latest"):
        return CatchUp(str(value))
    match = _WINDOW.fullmatch(value) if isinstance(value, str) else None
    window = _duration(match.group(1)) if match else None
    if window is None:
        raise InvalidOption(
            f"catch_up must be 'skip', 'latest' or 'all_within(<duration>)' such as 'all_within(6h)', "
            f"got {value!r}")
    return CatchUp("all_within", window)


def check_overlap(value: object) -> str:
    if value not in OVERLAPS:
        raise InvalidOption(f"overlap must be one of {', '.join(map(repr, OVERLAPS))}, got {value!r}")
    return str(value)


@dataclass(frozen=True)
class Selection:
    """Fire times to fire now (oldest first), how many were skipped, and where the schedule goes next."""

    fire: list[datetime]
    skipped: int
    next_at: datetime


def select(timing: Timing, policy: CatchUp, due: datetime, now: datetime) -> Selection:
    """Apply ``policy`` to the fire times in ``[due, now]`` (``due`` is the stored next fire time)."""
    if policy.how in ("latest", "skip"):
        last = timing.at_or_before(now)
        if last is None or last < due:
            return Selection([], 0, due)
        older = timing.count(due, last)
        late = policy.how == "skip" and now - last > SKIP_GRACE
        return Selection([] if late else [last], older + (1 if late else 0), timing.after(last))
    assert policy.window is not None
    start = max(due, at_or_after(timing, now - policy.window))
    fire: list[datetime] = []
    t = start
    while t <= now and len(fire) < BATCH:
        fire.append(t)
        t = timing.after(t)
    return Selection(fire, timing.count(due, start), t)


__all__ = ["BATCH", "OVERLAPS", "SKIP_GRACE", "CatchUp", "Selection", "all_within", "check_overlap",
           "parse_catch_up", "select"]
