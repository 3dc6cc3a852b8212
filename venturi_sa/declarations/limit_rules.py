"""Limits across every worker: :class:`Rate`, a kind's declared :class:`KindLimits`, and their checks.

``Task.global_concurrency``, ``Task.key_concurrency`` (with ``Task.limit_key``),
``Task.rate_limit`` and ``Task.key_rate_limit`` are checked when the class is
defined (:func:`check_limits` on the values ``venturi_sa.task.declared_limits``
reads off the class); the worker hands the declared values to the claim,
where a runtime override (``queue.set_limit``) replaces them (docs/limits.md).
Pure values and checks: nothing here touches a database.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from venturi_sa.errors import InvalidOption

MAX_RATE_WINDOW = timedelta(days=1)
"""The longest ``Rate.per``: the sliding log keeps one row per start for this long."""
MAX_KEY_LENGTH = 200
"""The longest limit key (characters)."""


@dataclass(frozen=True)
class Rate:
    """At most ``limit`` starts in any interval of length ``per`` (a sliding window on the database clock)."""

    limit: int
    per: timedelta

    def __post_init__(self) -> None:
        check_count(self.limit, "Rate.limit")
        if not isinstance(self.per, timedelta) or not timedelta(0) < self.per <= MAX_RATE_WINDOW:
            raise InvalidOption(f"Rate.per must be a timedelta of more than 0 and at most 1 day, got {self.per!r}")

    def __str__(self) -> str:
        return f"{self.limit}/{_seconds(self.per)}"


def _seconds(per: timedelta) -> str:
    seconds = per.total_seconds()
    return f"{seconds:g}s"


MAX_COUNT = 2**31 - 1
"""The largest limit or rate count: the columns holding them are 32-bit integers."""


def check_count(value: object, field: str) -> int:
    """``value`` if it is an integer in [1, :data:`MAX_COUNT`], else ``InvalidOption`` naming ``field``.

    0 is refused with a hint (to stop a kind, pause it).
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        hint = " (to stop a kind use queue.pause)" if value == 0 else ""
        raise InvalidOption(f"{field} must be None or an integer from 1 to {MAX_COUNT}, got {value!r:.80}{hint}")
    return value


@dataclass(frozen=True)
class KindLimits:
    """The limits in force for one kind (None: no such limit); ``keyed``: its task overrides ``limit_key``."""

    global_concurrency: int | None = None
    key_concurrency: int | None = None
    rate_limit: Rate | None = None
    key_rate_limit: Rate | None = None
    keyed: bool = False

    @property
    def any(self) -> bool:
        """True if the claim must take the limited path (a limit, or keys to be fair across)."""
        return self.keyed or any(v is not None for v in (self.global_concurrency, self.key_concurrency,
                                                          self.rate_limit, self.key_rate_limit))


def check_limits(name: str, declared: KindLimits) -> None:
    """Raise ``InvalidOption`` naming the bad limit of task type ``name``; a key limit needs ``declared.keyed``.

    ``declared`` holds the class attributes as written (not yet checked).
    """
    for field in ("global_concurrency", "key_concurrency"):
        value: Any = getattr(declared, field)
        if value is not None:
            check_count(value, f"{name}.{field}")
    for field in ("rate_limit", "key_rate_limit"):
        value = getattr(declared, field)
        if value is not None and not isinstance(value, Rate):
            raise InvalidOption(f"{name}.{field} must be None or venturi_sa.Rate(limit, per=timedelta), "
                                f"got {value!r}")
    if (declared.key_concurrency is not None or declared.key_rate_limit is not None) and not declared.keyed:
        raise InvalidOption(f"{name} declares a key limit (key_concurrency or key_rate_limit) but does not "
                            "override limit_key(); define limit_key(self) -> str | None")


def check_key(value: object, kind: str) -> str | None:
    """A ``limit_key()`` result: None or a non-empty string of at most 200 characters without NUL."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_KEY_LENGTH or "\x00" in value:
        raise InvalidOption(f"limit_key() of {kind!r} must return None or a non-empty string of at most "
                            f"{MAX_KEY_LENGTH} characters without NUL, got {value!r:.80}")
    return value
