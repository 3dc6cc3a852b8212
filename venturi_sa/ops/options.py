"""Checks on the arguments an operator passes: refused with ``InvalidOption`` before any SQL runs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from venturi_sa.errors import InvalidOption


def statuses(status: str | Sequence[str] | None, allowed: Sequence[str], what: str) -> tuple[str, ...]:
    """``status`` (one, several or None) as a tuple; a status outside ``allowed`` is refused."""
    values = (status,) if isinstance(status, str) else tuple(status or ())
    bad = [s for s in values if s not in allowed]
    if bad:
        raise InvalidOption(f"invalid {what} status {bad[0]!r}: use one of {', '.join(allowed)}")
    return values


def aware(name: str, value: datetime | None) -> datetime | None:
    """``value`` unchanged if it is None or a timezone-aware datetime; anything else is refused."""
    if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
        raise InvalidOption(f"{name} must be a timezone-aware datetime, got {value!r}")
    return value
