"""The sessions venturi's test helpers take, and a Session whose whole test is rolled back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session, scoped_session

from venturi_sa.models import Models

AnySession = Session | scoped_session[Any]
"""A Session, or a ``scoped_session`` such as Flask-SQLAlchemy's ``db.session``."""


def as_session(session: AnySession) -> Session:
    """The Session itself (for a ``scoped_session``, its current Session)."""
    if isinstance(session, scoped_session):
        current: Session = session()
        return current
    if isinstance(session, Session):
        return session
    raise TypeError(f"expected a SQLAlchemy Session or scoped_session, got {type(session).__name__} "
                    "(for an AsyncSession use the *_async helpers)")


def expire_jobs(session: Session, models: Models) -> None:
    """Expire the queue's Job and JournalEntry objects in ``session``: the next read reloads them."""
    for obj in list(session.identity_map.values()):
        if isinstance(obj, (models.Job, models.JournalEntry)):
            session.expire(obj)


@contextmanager
def rolled_back_session(engine: sa.Engine, **options: Any) -> Iterator[Session]:
    """A Session on one connection whose outer transaction is rolled back at exit.

    SQLAlchemy's "join an external transaction" recipe
    (``join_transaction_mode="create_savepoint"``): the code under test may
    commit and roll back as usual (each commit releases a savepoint), and
    nothing it did outlives the block.  ``options`` go to ``Session``.
    """
    with engine.connect() as connection:
        outer = connection.begin()
        session = Session(bind=connection, join_transaction_mode="create_savepoint", **options)
        try:
            yield session
        finally:
            session.close()
            outer.rollback()


__all__ = ["AnySession", "as_session", "expire_jobs", "rolled_back_session"]
