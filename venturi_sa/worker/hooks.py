"""The worker's hook types, naming what each hook is called with, and the shared no-op scope.

The hooks themselves are :class:`venturi_sa.run_hooks.RunHooks` (declared
below the worker because a queue carries them too, ``queue.run_hooks``); its
module says when each hook runs and what an error in it does.  These aliases
type ``Worker(on_start=..., on_stop=..., around_run=...)`` and ``WorkerApp``:
``on_start``/``on_stop`` get the :class:`~venturi_sa.Worker`, ``around_run``
and ``on_outcome`` the run's :class:`~venturi_sa.JobContext`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from venturi_sa.storage.params import FinishParams
    from venturi_sa.worker.context import JobContext
    from venturi_sa.worker.worker import Worker

LifecycleHook = Callable[["Worker"], None]
AroundRun = Callable[["JobContext"], AbstractContextManager[Any]]
OnOutcome = Callable[["JobContext", "FinishParams"], "FinishParams | None"]

NOTHING: AbstractContextManager[None] = nullcontext()
"""A reusable no-op context manager (for the per-run steps that usually have nothing to enter)."""


__all__ = ["NOTHING", "AroundRun", "LifecycleHook", "OnOutcome"]
