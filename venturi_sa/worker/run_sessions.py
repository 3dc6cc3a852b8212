"""The session a handler used, as the completer drives it: sync ``ctx.session`` or ``ctx.session_async``.

The completer writes a run's outcome inside the handler's own session so
both commit together.  :class:`RunSession` hides which kind it is: ``call(fn)``
runs ``fn(sync_session)`` in the session's transaction (for an
``AsyncSession`` through ``run_sync`` on the worker's loop, so the statements
go through the async driver) and ``close()`` closes it, rolling back whatever
was not committed, and never raises.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from sqlalchemy.orm import Session

from venturi_sa.worker.loop import worker_loop

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

logger = logging.getLogger("venturi_sa.worker")
T = TypeVar("T")


class RunSession(Protocol):
    def call(self, fn: Callable[[Session], T]) -> T:
        """``fn(session)`` in the run's session transaction; raises what ``fn`` raises."""

    def close(self) -> None:
        """Close the session (rolling back what was not committed); never raises."""


class SyncRunSession:
    """``ctx.session``: called on the caller's thread."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def call(self, fn: Callable[[Session], T]) -> T:
        return fn(self.session)

    def close(self) -> None:
        try:
            self.session.close()
        except Exception:  # noqa: BLE001 - a dead connection cannot be closed cleanly
            logger.debug("closing a run's session failed", exc_info=True)
            try:
                self.session.invalidate()
            except Exception:  # noqa: BLE001
                pass


class AsyncRunSession:
    """``ctx.session_async``: every call runs on the worker's loop, the caller's thread waits."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    def call(self, fn: Callable[[Session], T]) -> T:
        return worker_loop().run(self.session.run_sync(fn))

    def close(self) -> None:
        try:
            worker_loop().run(self.session.close())
        except Exception:  # noqa: BLE001 - a dead connection cannot be closed cleanly
            logger.debug("closing a run's async session failed", exc_info=True)
            try:
                worker_loop().run(self.session.invalidate())
            except Exception:  # noqa: BLE001
                pass
