"""Turning task payloads, carries and attachments into JSON and back.

Everything is checked with ``json.dumps(..., allow_nan=False)`` before it
reaches the session, so a bad value fails at the call that introduced it,
naming the field, instead of deep inside the caller's flush.
"""

from __future__ import annotations

import json
from typing import Any

from marshmallow import Schema, ValidationError

from venturi_sa.errors import InvalidPayload


def _first_bad_path(value: Any, path: str) -> str:
    """The dotted path of the first value in ``value`` that JSON cannot hold."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path}.{key!r} (non-string key)" if path else f"{key!r} (non-string key)"
            bad = _first_bad_path(item, f"{path}.{key}" if path else key)
            if bad:
                return bad
        return ""
    if isinstance(value, list):
        for index, item in enumerate(value):
            bad = _first_bad_path(item, f"{path}[{index}]")
            if bad:
                return bad
        return ""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"{path or '<value>'} ({exc})"
    return ""


def ensure_json(value: Any, what: str) -> Any:
    """Return ``value`` if JSON can store it exactly; raise ``InvalidPayload`` naming the field."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        where = _first_bad_path(value, "") or str(exc)
        raise InvalidPayload(f"{what} is not JSON-serializable at {where}", {where: [str(exc)]}) from None
    # json.dumps turns non-string keys into strings: the value would not round-trip.
    where = _first_bad_path(value, "")
    if where:
        raise InvalidPayload(f"{what} would change in JSON at {where}", {where: ["keys must be strings"]})
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
