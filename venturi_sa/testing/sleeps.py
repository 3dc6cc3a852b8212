"""Durable steps in tests: :func:`signal` in the test's transaction, and the sleeps ``drain`` elapses.

``drain`` runs a job until it sleeps (``ctx.sleep``), then, with nothing
else eligible, moves the test's database clock (:mod:`venturi_sa.testing.clock`)
to the soonest wake time and runs on, so a handler that sleeps for a day
finishes in one ``drain`` call.  The clock stays there until the test's
transaction ends, or (when the test had not set it itself) until the drain
returns.  A wait for a signal is never elapsed: send it with :func:`signal`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from venturi_sa.ops.job_steps import Signalled
from venturi_sa.queue import Queue
from venturi_sa.storage import clock as dbclock
from venturi_sa.storage import steps as step_store
from venturi_sa.testing.sessions import AnySession, as_session


def signal(session: AnySession, queue: Queue, job_id: str, name: str, payload: Any = None) -> Signalled:
    """``queue.signal`` in the test's ``session`` (its transaction; nothing committed): the next ``drain``
    runs the job woken by it."""
    return queue.signal(as_session(session), job_id, name, payload)


def elapse_sleeps(session: Session, queue: Queue, kinds: Sequence[str]) -> bool:
    """Freeze the (engaged) test clock at the soonest wake time of a sleeping job of ``kinds``; False if none."""
    wake = step_store.next_wake(queue.models, session, list(kinds))
    if wake is None or not dbclock.engaged(session):
        return False
    dbclock.freeze(session, wake)
    return True


__all__ = ["elapse_sleeps", "signal"]
