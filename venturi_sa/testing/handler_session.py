"""The ``ctx.session`` of a run a test helper makes, in a savepoint of the test's transaction.

It is the test's own session when that is already of the queue's
``session_class``; otherwise a session of the queue's class on the test
session's connection, so a handler written for ``sqlmodel.Session`` gets one
under ``drain`` as under a worker.  Likewise an ``async def`` handler's
``ctx.session_async`` (:func:`for_async_handler`) is the test's
``AsyncSession`` when it is of the queue's ``async_session_class``, else one
of that class on the same connection.  Either way
the handler's work is in a savepoint: kept (released) when the run succeeds,
rolled back when it raised, and the test's transaction holds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, SessionTransaction

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession


class HandlerSession:
    """``session`` for the handler; :meth:`keep` or :meth:`discard` ends its savepoint.

    ``as_is``: use the test's session whatever its class (an async handler's run);
    ``separate``: use this session (on the test's connection) instead.
    """

    def __init__(self, test_session: Session, session_class: type[Session], *, as_is: bool = False,
                 separate: Session | None = None) -> None:
        self.test_session = test_session
        self._savepoint: SessionTransaction | None = None
        if separate is not None:
            self.session = separate
            self.separate = True
        elif as_is or isinstance(test_session, session_class):
            self.session = test_session
            self._savepoint = test_session.begin_nested()
            self.separate = False
        else:  # the first use begins a savepoint on the test's connection (create_savepoint)
            self.session = session_class(bind=test_session.connection(), join_transaction_mode="create_savepoint",
                                         expire_on_commit=False)
            self.separate = True

    def keep(self) -> None:
        """Flush the handler's work and release its savepoint (SQLAlchemyError if the flush fails)."""
        if self._savepoint is not None:
            self.session.flush()
            if self._savepoint.is_active:  # the handler may have committed or rolled back ctx.session itself
                self._savepoint.commit()
        elif self.session.in_transaction():
            self.session.commit()

    def discard(self) -> None:
        """Roll the handler's work back to its savepoint."""
        if self._savepoint is not None:
            if self._savepoint.is_active:
                self._savepoint.rollback()
        elif self.session.in_transaction():
            self.session.rollback()

    def close(self) -> None:
        """Close a separate session; the test sees its work on reload (its objects are expired)."""
        if self.separate:
            self.session.close()
            self.test_session.expire_all()


def for_async_handler(test_session: Session, proxy: AsyncSession,
                      async_class: type[AsyncSession]) -> tuple[HandlerSession, AsyncSession]:
    """An ``async def`` handler's savepoint and its ``ctx.session_async``, inside ``proxy.run_sync``.

    ``proxy`` (the test's ``AsyncSession``, whose ``sync_session`` is
    ``test_session``) itself if it is an ``async_class``; otherwise a new
    ``async_class`` session on the same connection
    (``join_transaction_mode="create_savepoint"``, ``expire_on_commit=False``),
    whose work the test's transaction holds as it does the test session's.
    """
    if isinstance(proxy, async_class):
        return HandlerSession(test_session, Session, as_is=True), proxy
    from sqlalchemy.util import await_only  # inside run_sync's greenlet: the test loop's connection

    connection = await_only(proxy.connection())
    own = async_class(bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False)
    return HandlerSession(test_session, Session, separate=own.sync_session), own


__all__ = ["HandlerSession", "for_async_handler"]
