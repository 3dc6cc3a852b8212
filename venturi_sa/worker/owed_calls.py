"""The worker's part in :mod:`venturi_sa.owed_calls`: make the owed ``on_dead`` calls of its kinds.

A thread: every ``every`` seconds it deletes, in one transaction, the owed
rows of the kinds it runs whose task does not override ``Task.on_dead``
(written where the task's code was not at hand, e.g. a dependent killed by
its dead parent: no call is owed, and the row would keep the job from the
archive), then makes the due owed calls of the kinds that do override it,
each in a transaction of its own (the owed row is deleted in the hook's
transaction: a crash before the commit leaves it owed, after it made).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from venturi_sa.models import Models
from venturi_sa.owed_calls import make_owed_calls, overrides_on_dead
from venturi_sa.storage import owed_calls as owed_rows
from venturi_sa.task import Registry

logger = logging.getLogger("venturi_sa.worker")


def hooked_kinds(registry: Registry, kinds: list[str]) -> list[str]:
    """The kinds among ``kinds`` whose task overrides ``on_dead``."""
    return [k for k in kinds if overrides_on_dead(registry.get(k))]


class OwedCaller(threading.Thread):
    """Makes the owed ``on_dead`` calls of ``kinds`` (and drops those of its kinds without a hook) until
    ``stopping`` is set."""

    def __init__(self, models: Models, registry: Registry, kinds: list[str], sessions: Callable[[], Session],
                 every: float, stopping: threading.Event) -> None:
        super().__init__(name=f"venturi-on-dead-{models.prefix}", daemon=True)
        self.models = models
        self.registry = registry
        self.kinds = hooked_kinds(registry, kinds)
        self.hookless = [k for k in kinds if k not in self.kinds]
        self.sessions = sessions
        self.every = every
        self.stopping = stopping

    def make_due(self) -> int:
        """Handle every due owed call of this worker's kinds, one transaction each; returns how many.

        The rows of its kinds without ``on_dead`` go first, all in one
        transaction (counted in the result).
        """
        made = 0
        if self.hookless:
            with self.sessions() as session, session.begin():
                made += owed_rows.discard(self.models, session, self.hookless)
        while self.kinds and not self.stopping.is_set():
            with self.sessions() as session, session.begin():
                if not make_owed_calls(session, self.models, self.registry, kinds=self.kinds, limit=1):
                    return made
            made += 1
        return made

    def run(self) -> None:
        while not self.stopping.wait(self.every):
            try:
                self.make_due()
            except SQLAlchemyError as exc:
                logger.warning("making owed on_dead calls failed: %s", str(exc).splitlines()[0])
            except Exception:  # noqa: BLE001 - the thread must outlive one bad call
                logger.exception("making owed on_dead calls failed")
