"""Migration bodies: SQL files with a ``{{prefix}}`` token, and how they run.

Each revision in ``alembic_venturi/versions`` calls :func:`apply_body` with
the name of its file under ``alembic_venturi/sql``.  The body is read from
package data, the validated prefix replaces ``{{prefix}}`` by plain string
substitution, and the result runs exactly as written: online through a raw
DBAPI cursor with no parameters (so a ``:name`` or ``%`` in the text is never
taken for a placeholder), offline (``--sql``) written unchanged to Alembic's
output.  A released body is never edited; a schema change is a new version.
"""

from __future__ import annotations

from importlib import resources

from sqlalchemy import exc
from sqlalchemy.engine import Connection

from venturi_sa.prefix import validate_prefix

TOKEN = "{{prefix}}"
# Keys of ``alembic.config.Config.attributes`` that carry one run's inputs.
PREFIX_ATTRIBUTE = "venturi_prefix"
CONNECTION_ATTRIBUTE = "connection"


def read_body(name: str) -> str:
    """The text of ``sql/<name>.sql`` with the ``{{prefix}}`` token intact."""
    return (resources.files("alembic_venturi") / "sql" / f"{name}.sql").read_text(encoding="utf-8")


def render_body(name: str, prefix: str) -> str:
    """The body ``name`` for ``prefix``; raises ``BadPrefix`` before reading anything."""
    return read_body(name).replace(TOKEN, validate_prefix(prefix))


def execute_raw(connection: Connection, sql: str, label: str = "venturi migration") -> None:
    """Run ``sql`` (one or more statements) in ``connection``'s current transaction.

    A raw cursor with no parameters: psycopg2 then does no ``%`` formatting
    and SQLAlchemy no ``:name`` binding.  A database error is raised as the
    usual ``sqlalchemy.exc.DBAPIError`` subclass, its statement shown as ``label``.
    """
    dbapi_connection = connection.connection.dbapi_connection
    if dbapi_connection is None:
        raise RuntimeError("the connection has no live DBAPI connection")
    dbapi_error = connection.dialect.loaded_dbapi.Error
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(sql)
    except dbapi_error as err:
        raise exc.DBAPIError.instance(
            label, None, err, dbapi_error, dialect=connection.dialect
        ) from err
    finally:
        cursor.close()


def apply_body(name: str) -> None:
    """Apply ``sql/<name>.sql`` for the prefix of the running Alembic migration.

    Call only from a revision run by :mod:`alembic_venturi` (its ``Config``
    carries the prefix).  Online, the body joins the migration's transaction
    and commits or rolls back with it.
    """
    from alembic import op  # the running migration's: imported when one runs

    context = op.get_context()
    config = context.config
    if config is None or PREFIX_ATTRIBUTE not in config.attributes:
        raise RuntimeError(
            "venturi migrations need a queue prefix: run them with "
            "alembic_venturi.upgrade()/downgrade(), not a bare alembic command"
        )
    sql = render_body(name, config.attributes[PREFIX_ATTRIBUTE])
    if context.as_sql:
        context.impl.static_output(sql.strip())
    else:
        execute_raw(op.get_bind(), sql, f"-- venturi migration body sql/{name}.sql")
