"""Operator arguments: the default actor, and the checks that refuse a bad one (``InvalidOption``) before any SQL."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from venturi_sa.errors import InvalidOption
from venturi_sa.storage.params import NOTE_LIMIT

DEFAULT_ACTOR = "operator"
"""The actor an operator action records when the caller names none."""


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


def check_text(value: object, what: str, *, required: bool = False) -> str | None:
    """A note, reason or actor as stored: a string without NUL of at most ``NOTE_LIMIT`` characters."""
    if value is None:
        if required:
            raise InvalidOption(f"{what} is required")
        return None
    if not isinstance(value, str):
        raise InvalidOption(f"{what} must be a string, got {type(value).__name__}")
    if "\x00" in value or len(value) > NOTE_LIMIT or (required and not value.strip()):
        raise InvalidOption(f"{what} must be non-empty text without NUL, at most {NOTE_LIMIT} characters")
    return value
