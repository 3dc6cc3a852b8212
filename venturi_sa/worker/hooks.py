"""Worker lifecycle hooks and the per-run scope: ``on_start``, ``on_stop``, ``around_run``.

``on_start(worker)`` runs in the worker's process when it starts, after the
schema check and before any job is claimed (raising stops the start: the
error comes out of ``run()``); ``on_stop(worker)`` runs when it has stopped
(every outcome written, threads joined), last first; an error there is
logged.  ``around_run(ctx)`` returns a context manager entered around every
call of the application's code for one run (the handler, and, separately,
its outcome hook such as ``Task.on_dead``), on the thread or event-loop task
that runs it: open a Flask app context, a tracing span or a Sentry scope
there.  An error entering or leaving it is that run's failure, like an
error raised by the handler.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from venturi_sa.errors import InvalidOption

if TYPE_CHECKING:
    from venturi_sa.worker.context import JobContext
    from venturi_sa.worker.worker import Worker

logger = logging.getLogger("venturi_sa.worker")
LifecycleHook = Callable[["Worker"], None]
AroundRun = Callable[["JobContext"], AbstractContextManager[Any]]


def _hooks(name: str, value: Callable[..., Any] | Sequence[Callable[..., Any]] | None) -> tuple[Any, ...]:
    """``value`` as a tuple of callables (one, several or none); ``InvalidOption`` naming ``name`` otherwise."""
    if value is None:
        return ()
    hooks = (value,) if callable(value) else tuple(value)
    for hook in hooks:
        if not callable(hook):
            raise InvalidOption(f"{name} takes a callable or a list of callables, got {hook!r:.80}")
    return hooks


@dataclass(frozen=True)
class RunHooks:
    """A worker's hooks (each a tuple, called in order; ``on_stop`` last first)."""

    on_start: tuple[LifecycleHook, ...] = ()
    on_stop: tuple[LifecycleHook, ...] = ()
    around_run: tuple[AroundRun, ...] = ()

    @classmethod
    def of(cls, on_start: Any = None, on_stop: Any = None, around_run: Any = None) -> RunHooks:
        return cls(_hooks("on_start", on_start), _hooks("on_stop", on_stop), _hooks("around_run", around_run))

    def __add__(self, other: RunHooks) -> RunHooks:
        return RunHooks(self.on_start + other.on_start, self.on_stop + other.on_stop,
                        self.around_run + other.around_run)

    def started(self, worker: Worker) -> None:
        for hook in self.on_start:
            hook(worker)

    def stopped(self, worker: Worker) -> None:
        for hook in reversed(self.on_stop):
            try:
                hook(worker)
            except Exception:  # noqa: BLE001 - user code; the worker has stopped anyway
                logger.exception("on_stop hook %r raised", hook)

    def around(self, ctx: JobContext) -> AbstractContextManager[None]:
        """Enter every ``around_run(ctx)`` in order (left last first); a shared no-op without hooks."""
        return self._around(ctx) if self.around_run else NOTHING

    @contextmanager
    def _around(self, ctx: JobContext) -> Iterator[None]:
        with ExitStack() as stack:
            for hook in self.around_run:
                stack.enter_context(hook(ctx))
            yield


NOTHING: AbstractContextManager[None] = nullcontext()
"""A reusable no-op context manager (for the per-run steps that usually have nothing to enter)."""


NO_HOOKS = RunHooks()
