"""Column types that work on PostgreSQL and, for an application's SQLite test suite, elsewhere."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler


def json_column_type(none_as_null: bool = False) -> sa.types.TypeEngine[Any]:
    """``JSONB`` on PostgreSQL, plain ``JSON`` elsewhere (so an SQLite test suite can ``create_all``)."""
    return sa.JSON(none_as_null=none_as_null).with_variant(postgresql.JSONB(none_as_null=none_as_null),
                                                           "postgresql")


class JsonNullDefault(sa.sql.expression.ColumnElement[Any]):
    """The server default JSON ``null``: ``'null'::jsonb`` on PostgreSQL, ``'null'`` elsewhere."""

    inherit_cache = True


@compiles(JsonNullDefault)
def _json_null_default(element: JsonNullDefault, compiler: SQLCompiler, **kw: Any) -> str:
    return "'null'"


@compiles(JsonNullDefault, "postgresql")
def _json_null_default_pg(element: JsonNullDefault, compiler: SQLCompiler, **kw: Any) -> str:
    return "'null'::jsonb"
