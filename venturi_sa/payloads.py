"""Turning task payloads, carries and attachments into JSON and back.

Everything is checked for exact JSON round-tripping before it reaches the
session, so a bad value fails at the call that introduced it,
naming the field, instead of deep inside the caller's flush.
"""

from __future__ import annotations

import math
from typing import Any

from marshmallow import Schema, ValidationError

from venturi_sa.errors import InvalidPayload

_SCALARS = (int, type(None))  # bool is an int
_NUL = "\x00"
_NUL_REASON = "contains a NUL character (\\u0000), which PostgreSQL JSONB cannot store"


def _problem(value: Any, path: str) -> tuple[str, str] | None:
    """``(path, reason)`` of the first value JSON cannot hold exactly, or None.

    One walk, no serialization: only dicts with string keys, lists, strings
    without NUL characters, integers, booleans, None and finite floats pass.
    Tuples are refused too, since they come back as lists.
    """
    if isinstance(value, str):
        return (path or "<value>", _NUL_REASON) if _NUL in value else None
    if isinstance(value, _SCALARS):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else (path or "<value>", f"{value!r} is not a finite number")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return (f"{path}.{key!r}" if path else repr(key), "keys must be strings")
            if _NUL in key:
                return (f"{path}.{key!r}" if path else repr(key), _NUL_REASON)
            found = _problem(item, f"{path}.{key}" if path else key)
            if found:
                return found
        return None
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _problem(item, f"{path}[{index}]")
            if found:
                return found
        return None
    return (path or "<value>", f"{type(value).__name__} is not JSON (serialize it in the schema)")


def ensure_json(value: Any, what: str) -> Any:
    """Return ``value`` if JSON can store it exactly; raise ``InvalidPayload`` naming the field."""
    found = _problem(value, "")
    if found:
        where, reason = found
        raise InvalidPayload(f"{what} is not JSON-serializable at {where}: {reason}", {where: [reason]})
    return value


def load(schema: Schema, data: Any, what: str) -> Any:
    """``schema.load(data)``, raising ``InvalidPayload`` that names each bad field."""
    try:
        return schema.load(data)
    except ValidationError as exc:
        messages = exc.messages if isinstance(exc.messages, dict) else {"_schema": exc.messages}
        fields = ", ".join(f"{name}: {msg}" for name, msg in messages.items())
        raise InvalidPayload(f"invalid {what}: {fields}", dict(messages)) from None


def dump(schema: Schema, value: Any, what: str) -> Any:
    """Serialize a loaded value with ``schema`` and check the result is JSON."""
    try:
        data = schema.dump(value)
    except (TypeError, ValueError, AttributeError) as exc:
        raise InvalidPayload(f"cannot serialize {what}: {exc}") from None
    return ensure_json(data, what)
