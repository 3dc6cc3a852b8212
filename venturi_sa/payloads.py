"""Turning task payloads, carries and attachments into JSON and back.

Everything is checked for exact JSON round-tripping before it reaches the
session, so a bad value fails at the call that introduced it,
naming the field, instead of deep inside the caller's flush.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from marshmallow import Schema, ValidationError, fields, missing

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


# Field classes whose load and dump return a value of exactly this type unchanged.
_IDENTITY_FIELDS: dict[type, type] = {fields.Integer: int, fields.String: str, fields.Boolean: bool}
_PLANS: dict[int, tuple[Schema, dict[str, type] | None, frozenset[str]]] = {}


def _plan(schema: Schema) -> tuple[dict[str, type] | None, frozenset[str]]:
    """Per schema instance: field name -> exact value type if load and dump can be skipped, and the required names.

    A schema qualifies when it has no hooks, no ``only``/``exclude``/
    ``partial``/``many``, refuses unknown fields, and every field is a plain
    ``Integer``, ``String`` or ``Boolean`` with no validator, ``data_key``,
    ``attribute``, default, ``load_only`` or ``dump_only``.  For such a schema
    and a dict whose keys are its fields (the required ones present) and
    whose values have exactly the field's type, ``load`` and ``dump`` both
    return an equal dict: marshmallow would do no work but copying.
    """
    cached = _PLANS.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1], cached[2]
    found: dict[str, type] = {}
    types: dict[str, type] | None = found
    required: set[str] = set()
    hooks = getattr(schema, "_hooks", None) or {}  # a defaultdict: looked-up hook kinds appear, empty
    if (any(hooks.values()) or schema.only is not None or schema.exclude or schema.partial
            or schema.many or schema.unknown != "raise"):
        types = None
    else:
        for name, field in schema.fields.items():
            exact = _IDENTITY_FIELDS.get(type(field))
            if (exact is None or field.validators or field.data_key is not None or field.attribute is not None
                    or field.load_default is not missing or field.dump_default is not missing
                    or field.load_only or field.dump_only):
                types = None
                break
            found[name] = exact
            if field.required:
                required.add(name)
    if len(_PLANS) > 10_000:
        _PLANS.clear()
    _PLANS[id(schema)] = (schema, types, frozenset(required))
    return types, frozenset(required)


def _fits(types: dict[str, type] | None, required: frozenset[str], data: Any) -> bool:
    if types is None or type(data) is not dict or not required.issubset(data):
        return False
    for key, value in data.items():
        if types.get(key) is not type(value):
            return False
    return True


def unchanged_by(schema: Schema, data: Any) -> bool:
    """True if ``schema.load(data)`` and ``schema.dump(data)`` would both return a dict equal to ``data``."""
    if type(data) is not dict:
        return False
    types, required = _plan(schema)
    return _fits(types, required, data)


def _nul_free(value: dict[str, Any]) -> bool:
    return not any(type(v) is str and _NUL in v for v in value.values())


def load(schema: Schema, data: Any, what: str) -> Any:
    """``schema.load(data)``, raising ``InvalidPayload`` that names each bad field.

    When marshmallow could not change the data (:func:`unchanged_by`), a
    copy is returned without calling it.
    """
    if unchanged_by(schema, data):
        return dict(data)
    try:
        return schema.load(data)
    except ValidationError as exc:
        messages = exc.messages if isinstance(exc.messages, dict) else {"_schema": exc.messages}
        fields = ", ".join(f"{name}: {msg}" for name, msg in messages.items())
        raise InvalidPayload(f"invalid {what}: {fields}", dict(messages)) from None


def dump(schema: Schema, value: Any, what: str) -> Any:
    """Serialize a loaded value with ``schema`` and check the result is JSON (a copy, unchecked, when
    marshmallow could not change it: plain ints, bools and NUL-free strings are JSON)."""
    if unchanged_by(schema, value) and _nul_free(value):
        return dict(value)
    try:
        data = schema.dump(value)
    except (TypeError, ValueError, AttributeError) as exc:
        raise InvalidPayload(f"cannot serialize {what}: {exc}") from None
    return ensure_json(data, what)


def dump_many(schema: Schema, values: Sequence[Any], what: str) -> list[Any]:
    """:func:`dump` of each of ``values``, in order, with the schema's plan looked up once.

    The values marshmallow could change go through one ``schema.dump(...,
    many=True)``; each result is checked as :func:`dump` checks it.
    """
    types, required = _plan(schema)
    out: list[Any] = []
    slow: list[int] = []
    for index, value in enumerate(values):
        if _fits(types, required, value) and _nul_free(value):
            out.append(dict(value))
        else:
            out.append(None)
            slow.append(index)
    if slow:
        try:
            dumped = schema.dump([values[i] for i in slow], many=True)
        except (TypeError, ValueError, AttributeError) as exc:
            raise InvalidPayload(f"cannot serialize {what}: {exc}") from None
        for index, data in zip(slow, dumped, strict=True):
            out[index] = ensure_json(data, what)
    return out
