"""Removing a queue's rows, for test suites that commit."""

from __future__ import annotations

import sqlalchemy as sa

from venturi_sa.models import Models
from venturi_sa.queue import Queue
from venturi_sa.storage import harness
from venturi_sa.testing.sessions import AnySession, as_session


def purge(target: AnySession | sa.Engine | sa.Connection, queue: Queue | Models) -> int:
    """Delete every job of the queue, and its journal; returns how many jobs were deleted.

    With an Engine it runs in a transaction of its own and commits; with a
    Session or Connection it runs in the caller's transaction, which the
    caller commits.  Live jobs go too: stop the queue's workers first.
    """
    models = queue.models if isinstance(queue, Queue) else queue
    if isinstance(target, sa.Engine):
        with target.begin() as conn:
            return harness.purge(models, conn)
    runner = target if isinstance(target, sa.Connection) else as_session(target)
    return harness.purge(models, runner)


__all__ = ["purge"]
