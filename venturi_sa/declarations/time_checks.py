"""Checks of the times a caller gives: time limits, delays and ``run_at`` (``InvalidOption`` naming the field)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from venturi_sa.errors import InvalidOption

MAX_TIMEOUT = timedelta(days=30)
"""The longest time limit (``Task.timeout``, ``enqueue(timeout=...)``).

The worker's timer (``threading.Timer``) cannot wait past
``threading.TIMEOUT_MAX`` (about 292 years on Linux): a longer wait raises
``OverflowError`` in the timer's thread, and the run would have no limit.
A run that needs longer than 30 days should checkpoint and be split, or
set ``timeout=None``.
"""

MAX_DELAY = timedelta(days=36525)
"""The furthest ahead a job may be scheduled (``delay=``, ``run_at=``): 100 years."""

MAX_RUN_AT_PAST = timedelta(days=365)
"""The furthest in the past a ``run_at`` may be (it then runs at once): one year, on the caller's clock."""

def check_timeout(value: object, field: str = "timeout") -> timedelta | None:
    """Return ``value`` if it is None or a ``timedelta`` in (0, :data:`MAX_TIMEOUT`].

    Otherwise raise ``InvalidOption`` naming ``field``.
    """
    if value is not None and (not isinstance(value, timedelta) or value <= timedelta(0)):
        raise InvalidOption(f"{field} must be None or a positive timedelta, got {value!r}")
    if value is not None and value > MAX_TIMEOUT:
        raise InvalidOption(f"{field} must be at most {MAX_TIMEOUT.days} days (the worker's timer cannot hold "
                            f"much longer limits), got {value!r}; use None for no time limit")
    return value


def check_delay(value: object, field: str = "delay", *, positive: bool = False) -> timedelta | None:
    """Return ``value`` if it is None or a ``timedelta`` in [0, :data:`MAX_DELAY`].

    Otherwise raise ``InvalidOption`` naming ``field``; with ``positive``, zero is refused too.
    """
    if value is None:
        return None
    if not isinstance(value, timedelta) or value < timedelta(0) or (positive and not value):
        kind = "positive" if positive else "non-negative"
        raise InvalidOption(f"{field} must be a {kind} timedelta, got {value!r}")
    if value > MAX_DELAY:
        raise InvalidOption(f"{field} must be at most {MAX_DELAY.days} days (100 years), got {value!r}")
    return value


def check_run_at(value: object, field: str = "run_at", *, past: bool = True) -> datetime | None:
    """Return ``value`` if it is None or an aware ``datetime`` within [now - 1 year, now + 100 years].

    "now" is this process's clock; otherwise raise ``InvalidOption`` naming
    ``field``.  With ``past=False`` only the upper bound is checked.
    """
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidOption(f"{field} must be a datetime, got {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidOption(
            f"{field} must be timezone-aware (e.g. datetime.now(timezone.utc)); "
            "a naive time would be read in the database session's time zone"
        )
    now = datetime.now(timezone.utc)
    try:
        early, late = past and value < now - MAX_RUN_AT_PAST, value > now + MAX_DELAY
    except OverflowError:  # an offset that pushes the time out of datetime's range
        early = late = True
    if early or late:
        raise InvalidOption(f"{field} must be between one year ago and 100 years from now, got {value.isoformat()}")
    return value
