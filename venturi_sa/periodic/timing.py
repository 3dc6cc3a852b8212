"""When a schedule fires: cron expressions in a time zone, or a fixed interval.

Fire times are instants (timezone-aware UTC datetimes), computed the same way
in every process from the schedule's definition alone, so any worker agrees
on them.

**Cron** (:class:`Cron`): the expression (5 fields, or 6 with *seconds
first*) is matched against wall-clock times in the schedule's zone by
``croniter``, and each matching wall time becomes one instant by **the DST
rule**:

* a wall time that does not exist (the spring-forward gap, e.g. 02:30 in
  Europe/Berlin on the last Sunday of March) fires once, at the first valid
  instant after the gap (03:00 local, the transition itself);
* a wall time that exists twice (the fall-back fold, e.g. 02:30 on the last
  Sunday of October) fires once, at its first occurrence (summer time);
* wall times that map to the same instant (``*/30`` in a one-hour gap: 02:00,
  02:30 and 03:00 all map to 03:00) fire once.

**Intervals** (:class:`Every`): the multiples of the period since the Unix
epoch, in absolute time (``every=timedelta(minutes=30)`` fires at :00 and :30
UTC, 30 real minutes apart across a DST change); time zones do not apply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from venturi_sa.errors import InvalidOption, VenturiError

UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
COUNT_CAP = 100_000  # skipped fire times counted exactly up to this many per step
_SEARCH_CAP = 1_000_000  # croniter steps before giving up on an expression that never matches


class Timing(Protocol):
    """A schedule's fire times."""

    @property
    def spec(self) -> str:
        """The stored form (``cron:<expression>`` or ``every:<microseconds>``)."""

    def after(self, t: datetime) -> datetime:
        """The first fire time strictly after ``t``."""

    def at_or_before(self, t: datetime) -> datetime | None:
        """The last fire time at or before ``t`` (None if there is none)."""

    def count(self, start: datetime, end: datetime) -> int:
        """Fire times in ``[start, end)``, exactly up to :data:`COUNT_CAP`."""


def at_or_after(timing: Timing, t: datetime) -> datetime:
    """The first fire time at or after ``t``."""
    return timing.after(t - timedelta(microseconds=1))


@dataclass(frozen=True)
class Every:
    """Every ``period``, on the multiples of it since the Unix epoch (absolute time)."""

    period: timedelta

    def __post_init__(self) -> None:
        if not isinstance(self.period, timedelta) or self.period < timedelta(seconds=1):
            raise InvalidOption(f"every= must be a timedelta of at least 1 second, got {self.period!r}")
        if self.period % timedelta(seconds=1):
            raise InvalidOption(f"every= must be a whole number of seconds, got {self.period!r}")

    @property
    def spec(self) -> str:
        return f"every:{int(self.period.total_seconds())}"

    def _index(self, t: datetime) -> float:
        return (t - EPOCH) / self.period

    def after(self, t: datetime) -> datetime:
        return EPOCH + self.period * (math.floor(self._index(t)) + 1)

    def at_or_before(self, t: datetime) -> datetime | None:
        return EPOCH + self.period * math.floor(self._index(t))

    def count(self, start: datetime, end: datetime) -> int:
        if end <= start:
            return 0
        first = math.ceil(self._index(start))
        last = math.ceil(self._index(end))  # exclusive
        return min(max(0, last - first), COUNT_CAP)


def load_zone(name: object) -> ZoneInfo:
    """The IANA zone ``name``; ``InvalidOption`` naming it if unknown."""
    if not isinstance(name, str) or not name:
        raise InvalidOption(f"tz must be an IANA time zone name such as 'Europe/Berlin', got {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidOption(
            f"unknown time zone {name!r}: use an IANA name such as 'UTC' or 'Europe/Berlin' "
            "(pip install 'venturi[periodic]' brings the tzdata database)") from None


def _croniter() -> Any:
    try:
        from croniter import croniter  # type: ignore[import-untyped]
    except ImportError:
        raise VenturiError("cron schedules need croniter: pip install 'venturi[periodic]'") from None
    return croniter


def wall_instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """The instant of naive local ``wall`` under the DST rule (gap: the transition; fold: the first)."""
    first = wall.replace(tzinfo=zone, fold=0)
    if first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall:
        return first.astimezone(UTC)
    # In a gap: fold=0 reads it with the offset before the change, fold=1 with the one after;
    # the transition lies between the two readings.  Find it to the microsecond.
    lo = min(first.astimezone(UTC), wall.replace(tzinfo=zone, fold=1).astimezone(UTC))
    hi = max(first.astimezone(UTC), wall.replace(tzinfo=zone, fold=1).astimezone(UTC))
    offset = lo.astimezone(zone).utcoffset()
    while hi - lo > timedelta(microseconds=1):
        mid = lo + (hi - lo) / 2
        if mid.astimezone(zone).utcoffset() == offset:
            lo = mid
        else:
            hi = mid
    return hi


@dataclass(frozen=True)
class Cron:
    """A cron expression in a time zone, with the module's DST rule."""

    expression: str
    zone: ZoneInfo

    def __post_init__(self) -> None:
        fields = self.expression.split() if isinstance(self.expression, str) else []
        if len(fields) not in (5, 6):
            raise InvalidOption(
                f"invalid cron expression {self.expression!r}: expected 5 fields (minute hour day month "
                "weekday) or 6 with seconds first")
        croniter = _croniter()
        try:
            croniter(self.expression, datetime(2000, 1, 1), second_at_beginning=True)
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidOption(f"invalid cron expression {self.expression!r}: {exc}") from None

    @property
    def spec(self) -> str:
        return f"cron:{self.expression}"

    def _walls(self, start: datetime, reverse: bool = False) -> Any:
        it = _croniter()(self.expression, start, second_at_beginning=True)
        step = it.get_prev if reverse else it.get_next
        for _ in range(_SEARCH_CAP):
            yield step(datetime)
        raise InvalidOption(f"cron expression {self.expression!r} has no fire time near {start}")

    def _local(self, t: datetime) -> datetime:
        return t.astimezone(self.zone).replace(tzinfo=None, fold=0)

    def after(self, t: datetime) -> datetime:
        for wall in self._walls(self._local(t)):
            instant = wall_instant(wall, self.zone)
            if instant > t:
                return instant
        raise AssertionError("unreachable")

    def at_or_before(self, t: datetime) -> datetime | None:
        local = t.astimezone(self.zone)
        # In the second pass of a fold, wall times up to an offset-change later fired (first pass) before t.
        ahead = (local.replace(fold=0).utcoffset() or timedelta()) - (local.utcoffset() or timedelta())
        start = local.replace(tzinfo=None, fold=0) + max(ahead, timedelta()) + timedelta(seconds=1)
        for wall in self._walls(start, reverse=True):
            instant = wall_instant(wall, self.zone)
            if instant <= t:
                return instant
        return None

    def count(self, start: datetime, end: datetime) -> int:
        n, t = 0, at_or_after(self, start)
        while t < end and n < COUNT_CAP:
            n, t = n + 1, self.after(t)
        return n


def parse_spec(spec: str, tz: str) -> Timing:
    """The timing stored as ``spec`` (see :attr:`Timing.spec`) in zone ``tz``."""
    how, _, value = spec.partition(":")
    if how == "every":
        return Every(timedelta(seconds=int(value)))
    return Cron(value, load_zone(tz))


__all__ = ["Cron", "Every", "Timing", "at_or_after", "load_zone", "parse_spec", "wall_instant"]
