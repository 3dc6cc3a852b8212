"""The short transactions the operations run in: never the application's session.

Each operation opens its own ``Session`` on the given ``Engine`` for as long
as one read or one write takes, so it never holds locks while anything else
runs.  On success the transaction commits; on any error it rolls back and
nothing it did remains; if the process dies mid-way, PostgreSQL rolls the
open transaction back when the connection drops.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.orm import Session

from alembic_venturi.runner import fix_hint
from venturi_sa.errors import SchemaNotMigrated
from venturi_sa.models import Models
from venturi_sa.storage.faults import is_undefined_table


@contextmanager
def short_transaction(models: Models, engine: sa.Engine, isolation: str | None = None) -> Iterator[Session]:
    """A Session in its own transaction, committed on exit and rolled back on any error.

    ``isolation`` (e.g. ``"REPEATABLE READ"``) applies to this transaction
    only.  A missing table or column (the queue is not migrated, or is at an
    older version) becomes :class:`~venturi_sa.SchemaNotMigrated` naming the
    command that fixes it.
    """
    bind: sa.Engine = engine.execution_options(isolation_level=isolation) if isolation else engine
    try:
        with Session(bind) as session, session.begin():
            yield session
    except sa.exc.ProgrammingError as exc:
        if is_undefined_table(exc):
            raise SchemaNotMigrated(
                f"queue {models.prefix!r} is not migrated (or is at an older version): "
                f"{fix_hint(models.prefix)}") from exc
        raise
