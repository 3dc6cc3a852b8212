"""The short transactions the operations run in: never the application's session.

Each operation opens its own ``Session`` on the given ``Engine`` for as long
as one read or one write takes, so it never holds locks while anything else
runs.  On success the transaction commits; on any error it rolls back and
nothing it did remains; if the process dies mid-way, PostgreSQL rolls the
open transaction back when the connection drops.  The reads may be given the
caller's ``Session`` or ``Connection`` instead (:func:`reading`): they then
read in the caller's transaction and leave it as it was.
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
from venturi_sa.storage.params import Runner


@contextmanager
def short_transaction(models: Models, engine: sa.Engine, isolation: str | None = None) -> Iterator[Session]:
    """A Session in its own transaction, committed on exit and rolled back on any error.

    ``isolation`` (e.g. ``"REPEATABLE READ"``) applies to this transaction
    only.  A missing table or column (the queue is not migrated, or is at an
    older version) becomes :class:`~venturi_sa.SchemaNotMigrated` naming the
    command that fixes it.
    """
    try:
        with Session(engine) as session, session.begin():
            if isolation:  # on the connection, not an engine copy: an engine view (a bounded one) may not nest one
                session.connection(execution_options={"isolation_level": isolation})
            yield session
    except sa.exc.ProgrammingError as exc:
        if is_undefined_table(exc):
            raise _not_migrated(models) from exc
        raise


@contextmanager
def reading(models: Models, bind: sa.Engine | Runner, isolation: str | None = None) -> Iterator[Runner]:
    """Where a read runs: a :func:`short_transaction` on an ``Engine``, else the caller's own transaction.

    A ``Session`` or ``Connection`` is used as it is: the read sees what the
    caller's transaction wrote and not yet committed (a ``Session`` with
    ``autoflush`` is flushed first, as an ORM query would), starts that
    transaction if none is open (autobegin), and never commits, rolls back or
    closes it: the caller's commit or rollback decides, as for anything else
    it did.  ``isolation`` then does not apply: the read runs at the caller's
    isolation level, each statement in the caller's snapshot.
    """
    if isinstance(bind, sa.Engine):
        with short_transaction(models, bind, isolation) as session:
            yield session
        return
    try:
        if isinstance(bind, Session) and bind.autoflush:
            bind.flush()
        yield bind
    except sa.exc.ProgrammingError as exc:
        if is_undefined_table(exc):
            raise _not_migrated(models) from exc
        raise


def _not_migrated(models: Models) -> SchemaNotMigrated:
    """A missing table or column: the queue is not migrated, or is at an older version."""
    return SchemaNotMigrated(f"queue {models.prefix!r} is not migrated (or is at an older version): "
                             f"{fix_hint(models.prefix)}")
