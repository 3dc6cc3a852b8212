"""Run hooks: lifecycle hooks and the per-run scope, ``on_start``, ``on_stop``, ``around_run``, ``on_outcome``.

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

``on_outcome(ctx, params)`` is called once per run on the thread that ran
it, when the run's outcome is decided and before it is written: it may
return replacement ``FinishParams`` (the same fence and outcome, e.g. with
more in the attachment) or None to keep them.  An error there (``SystemExit``
included; only ``KeyboardInterrupt`` stops the worker) is logged and the
outcome kept; nothing is written yet, so a crash loses nothing but the
run (the lease expires and the job runs again).  It sees the outcome the
run decided, not yet the one recorded: the write may still turn a
``retried``/``paused`` into ``dead`` (a cancel request the run never read);
the worker's ``finished`` event carries the recorded one.

A queue carries hooks of its own, ``queue.run_hooks``
(``venturi_sa.contrib.otel.instrument(queue)`` adds there); each runner of
the queue (the worker, ``WorkerApp``, the testing helpers) runs them before
its own, i.e. outside them.  :class:`RunHooks` is declared here, beside the
queue and below the worker, because the queue carries it: a hook receives the
worker (``venturi_sa.Worker``) or the run's context (``venturi_sa.JobContext``),
typed here with the public protocol ``venturi_sa.JobContext`` and, for the
worker, ``Any`` (the worker sits above this module).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from venturi_sa.declarations.task_contexts import JobContext
from venturi_sa.errors import InvalidOption
from venturi_sa.storage.params import FinishParams

logger = logging.getLogger("venturi_sa.worker")
# What each hook is called with.  ``on_start``/``on_stop`` get the Worker, typed ``Any``: the worker sits
# above this module, so naming its class would run against the import direction.  A hook annotated
# ``def on_start(worker: Worker) -> None`` type-checks against it all the same.
LifecycleHook = Callable[[Any], None]
AroundRun = Callable[[JobContext], AbstractContextManager[Any]]
OnOutcome = Callable[[JobContext, FinishParams], "FinishParams | None"]

NOTHING: AbstractContextManager[None] = nullcontext()
"""A reusable no-op context manager (the scope of a run without ``around_run`` hooks, and the like)."""


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
    on_outcome: tuple[OnOutcome, ...] = ()

    @classmethod
    def of(cls, on_start: Any = None, on_stop: Any = None, around_run: Any = None,
           on_outcome: Any = None) -> RunHooks:
        return cls(_hooks("on_start", on_start), _hooks("on_stop", on_stop), _hooks("around_run", around_run),
                   _hooks("on_outcome", on_outcome))

    def __add__(self, other: RunHooks) -> RunHooks:
        return RunHooks(self.on_start + other.on_start, self.on_stop + other.on_stop,
                        self.around_run + other.around_run, self.on_outcome + other.on_outcome)

    def started(self, worker: Any) -> None:
        for hook in self.on_start:
            hook(worker)

    def stopped(self, worker: Any) -> None:
        for hook in reversed(self.on_stop):
            try:
                hook(worker)
            except Exception:  # noqa: BLE001 - user code; the worker has stopped anyway
                logger.exception("on_stop hook %r raised", hook)

    def around(self, ctx: Any) -> AbstractContextManager[None]:
        """Enter every ``around_run(ctx)`` in order (left last first); a shared no-op without hooks."""
        return self._around(ctx) if self.around_run else NOTHING

    def outcome(self, ctx: Any, params: FinishParams) -> FinishParams:
        """The run's outcome after every ``on_outcome`` hook, in order; the shared ``params`` without hooks.

        A hook returning anything but None or ``FinishParams`` of the same
        fence and outcome, or raising, is logged and skipped: ``SystemExit``
        and any other ``BaseException`` too, so that the run's outcome is
        still written; only ``KeyboardInterrupt`` propagates (it stops the
        worker, which releases the run).
        """
        for hook in self.on_outcome:
            try:
                changed = hook(ctx, params)
            except BaseException as exc:  # noqa: BLE001 - user code; the outcome stands
                if isinstance(exc, KeyboardInterrupt):  # as worker.pipeline_stages.absorb
                    raise
                logger.exception("on_outcome hook %r raised; the outcome is kept", hook)
                continue
            if changed is None:
                continue
            if getattr(changed, "fence", None) != params.fence or getattr(changed, "outcome", None) != params.outcome:
                logger.error("on_outcome hook %r returned %r, not the run's FinishParams; ignored", hook, changed)
                continue
            params = changed
        return params

    @contextmanager
    def _around(self, ctx: Any) -> Iterator[None]:
        with ExitStack() as stack:
            for hook in self.around_run:
                stack.enter_context(hook(ctx))
            yield


NO_HOOKS = RunHooks()
"""No hooks: the queue's default ``run_hooks``."""


__all__ = ["NO_HOOKS", "NOTHING", "AroundRun", "LifecycleHook", "OnOutcome", "RunHooks"]
