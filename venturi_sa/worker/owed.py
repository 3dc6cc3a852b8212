"""The worker's part in :mod:`venturi_sa.dead_calls`: make the owed ``on_dead`` calls of its kinds.

A thread, started only when a kind the worker runs overrides ``Task.on_dead``:
every ``every`` seconds it makes the due owed calls of those kinds, each in
a transaction of its own (the owed row is deleted in the hook's
transaction: a crash before the commit leaves it owed, after it made).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from venturi_sa.dead_calls import make_owed_calls, overrides_on_dead
from venturi_sa.models import Models
from venturi_sa.task import Registry

logger = logging.getLogger("venturi_sa.worker")


def hooked_kinds(registry: Registry, kinds: list[str]) -> list[str]:
    """The kinds among ``kinds`` whose task overrides ``on_dead``."""
    return [k for k in kinds if overrides_on_dead(registry.get(k))]


class OwedCaller(threading.Thread):
    """Makes the owed ``on_dead`` calls of ``kinds`` until ``stopping`` is set."""

    def __init__(self, models: Models, registry: Registry, kinds: list[str], sessions: Callable[[], Session],
                 every: float, stopping: threading.Event) -> None:
        super().__init__(name=f"venturi-on-dead-{models.prefix}", daemon=True)
        self.models = models
        self.registry = registry
        self.kinds = kinds
        self.sessions = sessions
        self.every = every
        self.stopping = stopping

    def make_due(self) -> int:
        """Handle every due owed call of this worker's kinds, one transaction each; returns how many."""
        made = 0
        while not self.stopping.is_set():
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
