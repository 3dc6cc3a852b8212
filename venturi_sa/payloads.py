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

from venturi_sa.errors import InvalidOption, InvalidPayload

_NUL = "\x00"
_NUL_REASON = "contains a NUL character (\\u0000), which PostgreSQL JSONB cannot store"

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
"""``Queue(max_payload_bytes=...)``'s default: 1 MiB of JSON per payload, carry, checkpoint, attachment or result."""

MAX_DEPTH = 64
"""The deepest nesting of lists and objects stored (the outermost container is level 1)."""

MIN_INT, MAX_INT = -(2**63), 2**63 - 1
"""The integers stored: the signed 64-bit range.

JSONB keeps far longer integers exactly (as ``numeric``), but Python's
``json`` refuses to write or read integers of more than 4300 digits (a
limit each process may lower to 640), PostgreSQL's ``(payload->>'n')::bigint``
and most other languages' JSON readers stop at 64 bits; send larger numbers
as strings.
"""


_BASES: tuple[type, ...] = (bool, str, int, float, dict, list)


class _Refused(Exception):
    """Raised inside the walk; each container it passes through adds its step to ``path``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.steps: list[str] = []


def _string_size(text: str, max_bytes: int) -> int:
    """The UTF-8 size of ``text`` as a JSON string (escapes not counted); refuses NUL and lone surrogates."""
    if _NUL in text:
        raise _Refused(_NUL_REASON)
    if text.isascii():
        return len(text) + 2
    if len(text) > max_bytes:
        return len(text) + 2  # over the bound already: no need to encode it
    try:
        return len(text.encode()) + 2
    except UnicodeEncodeError as exc:
        raise _Refused(f"contains a lone surrogate ({text[exc.start]!r}) at character {exc.start}, which is "
                       "not valid Unicode (PostgreSQL JSONB cannot store it)") from None


def _size(value: Any, depth: int, max_bytes: int) -> int:
    """The size in bytes of ``value``'s compact JSON text (strings counted in UTF-8, without escapes).

    Raises :class:`_Refused` at the first value JSONB cannot hold exactly:
    only dicts with string keys, lists, strings without NUL characters or
    lone surrogates, integers in the signed 64-bit range, booleans, None
    and finite floats pass, nested at most :data:`MAX_DEPTH` levels.  Tuples
    are refused too, since they come back as lists.
    """
    kind = type(value)
    if kind is str:
        return _string_size(value, max_bytes)
    if kind is bool:
        return 4 if value else 5
    if kind is int:
        if not MIN_INT <= value <= MAX_INT:
            raise _Refused(f"an integer of {value.bit_length()} bits is outside the stored range (signed "
                           f"64-bit, {MIN_INT} to {MAX_INT}); send larger numbers as strings")
        return len(str(value))
    if value is None:
        return 4
    if kind is float:
        if not math.isfinite(value):
            raise _Refused(f"{value!r} is not a finite number")
        return len(repr(value))
    if kind is dict or kind is list:
        if depth >= MAX_DEPTH:
            raise _Refused(f"nested more than {MAX_DEPTH} levels deep (the bound on stored JSON)")
        return _container_size(value, depth + 1, max_bytes)
    for base in _BASES:  # subclasses (an IntEnum, an OrderedDict): judged by their base type
        if isinstance(value, base):
            converted: Any = base(value)
            return _size(converted, depth, max_bytes)
    raise _Refused(f"{kind.__name__} is not JSON (serialize it in the schema)")


def _container_size(value: dict[Any, Any] | list[Any], depth: int, max_bytes: int) -> int:
    total = 1 + max(len(value), 1)  # brackets and commas
    if isinstance(value, list):
        for index, item in enumerate(value):
            try:
                total += _size(item, depth, max_bytes)
            except _Refused as exc:
                exc.steps.append(f"[{index}]")
                raise
        return total
    for key, item in value.items():
        try:
            if type(key) is not str:
                raise _Refused("keys must be strings")
            total += _string_size(key, max_bytes) + 1 + _size(item, depth, max_bytes)
        except _Refused as exc:
            step = key if type(key) is str else repr(key)
            exc.steps.append(f".{step}" if len(step) <= 40 else f".{step[:37]}...")
            raise
    return total


def _where(exc: _Refused) -> str:
    path = "".join(reversed(exc.steps)).encode("utf-8", "backslashreplace").decode()  # a lone surrogate as \\udXXX
    path = path[1:] if path.startswith(".") else (path or "<value>")
    return path if len(path) <= 200 else f"{path[:97]}...{path[-100:]}"


def check_max_bytes(value: object, what: str = "max_payload_bytes") -> int:
    """Return ``value`` if it is a positive integer (a byte bound), else raise ``InvalidOption`` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidOption(f"{what} must be a positive integer (bytes), got {value!r}")
    return value


def json_size(value: Any, what: str, max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> int:
    """The size of ``value`` as compact JSON, checked; raise ``InvalidPayload`` naming the field and the size.

    Refused: anything JSONB cannot store exactly (see :func:`ensure_json`)
    and a value over ``max_bytes`` (its strings counted in UTF-8, escapes
    not counted).  Reads ``value`` only.
    """
    try:
        size = _size(value, 0, max_bytes)
    except _Refused as exc:
        where = _where(exc)
        raise InvalidPayload(f"{what} is not JSON-serializable at {where}: {exc.reason}",
                             {where: [exc.reason]}) from None
    if size > max_bytes:
        reason = (f"{what} is {size:,} bytes as JSON, over the {max_bytes:,}-byte bound "
                  "(Queue(max_payload_bytes=...)); store large data elsewhere and pass its key")
        raise InvalidPayload(reason, {"<value>": [reason]})
    return size


def ensure_json(value: Any, what: str, max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> Any:
    """Return ``value`` if JSON can store it exactly and it fits ``max_bytes``; else raise ``InvalidPayload``.

    Exactly: dicts with string keys, lists, strings without NUL characters
    or lone surrogates, integers in the signed 64-bit range
    (:data:`MIN_INT`..:data:`MAX_INT`), booleans, None and finite floats,
    nested at most :data:`MAX_DEPTH` levels.  The error names the field (a
    path such as ``items[3].name``) or the size.
    """
    json_size(value, what, max_bytes)
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


_INT_CHARS = len(str(MIN_INT))
"""The most characters an integer in the stored range takes as JSON (the bound :func:`_flat_fits` counts)."""


def _flat_fits(types: dict[str, type] | None, required: frozenset[str], data: Any, max_bytes: int) -> bool:
    """True if ``data`` passes :func:`_fits` and, as a flat dict of ASCII strings, ints and bools, fits every bound.

    The marshmallow-free path's check in one pass: False sends ``data`` to
    :func:`ensure_json` (or the schema), which then counts exactly and
    names any problem.  Integers count as the longest an in-range integer
    can be, so a dict near ``max_bytes`` gets False here.
    """
    if types is None or type(data) is not dict or not required.issubset(data):
        return False
    size = 1 + len(data)
    for key, item in data.items():
        kind = type(item)
        if types.get(key) is not kind or not key.isascii() or _NUL in key:
            return False
        if kind is str:
            if not item.isascii() or _NUL in item:
                return False
            size += len(item) + 2
        elif kind is int:
            if not MIN_INT <= item <= MAX_INT:
                return False
            size += _INT_CHARS
        else:
            size += 5
        size += len(key) + 3
    return size <= max_bytes


def unchanged_by(schema: Schema, data: Any) -> bool:
    """True if ``schema.load(data)`` and ``schema.dump(data)`` would both return a dict equal to ``data``."""
    if type(data) is not dict:
        return False
    types, required = _plan(schema)
    return _fits(types, required, data)


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


def dump(schema: Schema, value: Any, what: str, max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> Any:
    """Serialize a loaded value with ``schema`` and check the result is JSON within ``max_bytes``.

    When marshmallow could not change the value (:func:`unchanged_by`) it
    is not called: a copy is checked instead.
    """
    types, required = _plan(schema)
    if _flat_fits(types, required, value, max_bytes):
        return dict(value)
    if _fits(types, required, value):
        return ensure_json(dict(value), what, max_bytes)
    try:
        data = schema.dump(value)
    except (TypeError, ValueError, AttributeError) as exc:
        raise InvalidPayload(f"cannot serialize {what}: {exc}") from None
    return ensure_json(data, what, max_bytes)


def dump_many(schema: Schema, values: Sequence[Any], what: str,
              max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> list[Any]:
    """:func:`dump` of each of ``values``, in order, with the schema's plan looked up once.

    The values marshmallow could change go through one ``schema.dump(...,
    many=True)``; each result is checked as :func:`dump` checks it.
    """
    types, required = _plan(schema)
    out: list[Any] = []
    slow: list[int] = []
    for index, value in enumerate(values):
        if _flat_fits(types, required, value, max_bytes):
            out.append(dict(value))
        elif _fits(types, required, value):
            out.append(ensure_json(dict(value), what, max_bytes))
        else:
            out.append(None)
            slow.append(index)
    if slow:
        try:
            dumped = schema.dump([values[i] for i in slow], many=True)
        except (TypeError, ValueError, AttributeError) as exc:
            raise InvalidPayload(f"cannot serialize {what}: {exc}") from None
        for index, data in zip(slow, dumped, strict=True):
            out[index] = ensure_json(data, what, max_bytes)
    return out
