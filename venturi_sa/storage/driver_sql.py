"""The worker's hot statements compiled once, then sent as driver SQL.

SQLAlchemy builds and compiles each statement (once per statement and
engine dialect); every execution then goes through
``Connection.exec_driver_sql``, which keeps what a connection gives every
statement (the engine's events and echo, error translation to
``DBAPIError`` with the driver's SQLSTATE, invalidation of a dead
connection) and skips the per-execution work of the compiled path: the
compiled-cache lookup, re-rendering the expanding ``IN`` of the claim's
kinds, and result processors on every column of every row.  Rows come back
as the driver returns them.

Used only where that changes nothing a caller sees: a ``Connection`` (a
``Session`` would autoflush first), on psycopg2 or psycopg 3 (named
``%(name)s`` parameters; their rows already carry the Python types the
compiled path would give), with no ``schema_translate_map``.  Anything else
takes the compiled path, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

_DRIVERS = frozenset({"psycopg2", "psycopg"})
_TEXTS: dict[tuple[int, int], tuple[Any, Any, str, dict[str, Any]]] = {}


def driver_text(runner: Any, statement: Any, *, expand: bool = False) -> tuple[str, dict[str, Any]] | None:
    """``statement``'s SQL for ``runner``'s driver and its fixed parameters, or None to use the compiled path.

    The fixed parameters are the values bound in the statement itself (the
    claim's kinds); the caller adds the ones it binds per execution.
    ``expand`` renders expanding parameters (``IN`` lists) once, into the
    text: the statement must then bind a value (a default) to every parameter.
    """
    if not isinstance(runner, sa.Connection):
        return None
    dialect = runner.dialect
    if dialect.driver not in _DRIVERS or dialect.paramstyle != "pyformat":
        return None
    if runner.get_execution_options().get("schema_translate_map"):
        return None
    key = (id(statement), id(dialect))
    cached = _TEXTS.get(key)
    if cached is None or cached[0] is not statement or cached[1] is not dialect:
        if len(_TEXTS) > 1000:
            _TEXTS.clear()
        compiled = statement.compile(dialect=dialect, compile_kwargs={"render_postcompile": expand})
        cached = _TEXTS[key] = (statement, dialect, str(compiled), dict(compiled.params))
    return cached[2], cached[3]


def execute(runner: sa.Connection, text: str, fixed: Mapping[str, Any], binds: Mapping[str, Any]) -> Any:
    """Run ``text`` with ``fixed`` and ``binds`` on ``runner``; the ``CursorResult``."""
    return runner.exec_driver_sql(text, {**fixed, **binds})


__all__ = ["driver_text", "execute"]
