"""Outcome hooks: ``Task.on_complete``, ``on_retry`` and ``on_dead``, run in the outcome's transaction.

A run whose task overrides one of them is persisted in a session (the
handler's ``ctx.session`` if it used one, else a fresh one): the fenced
outcome write goes first, then the hook, with ``ctx.session`` in that same
transaction, then one commit.  So the application's own rows change
exactly once, together with the job's final state: on commit both land,
on a rollback or a crash before the commit neither does (the claim then
stands until its lease expires and recovery records ``stale-recovered``).
If the fence fails (the lease was lost) the hook is not called and nothing
commits.  The hook is the one of the outcome the write recorded (the
statement's own report, :meth:`~venturi_sa.storage.backend.Backend.finish_many`),
not the one the run asked for: a ``retried`` (or ``paused``) that a cancel
request still undelivered turned into ``dead`` calls no ``on_retry``; its
``on_dead`` is owed by that statement and made once, by the next worker of
the kind (:mod:`venturi_sa.owed_calls`).  A hook that raises anything but
``KeyboardInterrupt`` (``SystemExit``, ``GeneratorExit`` or any other
``BaseException`` included) rolls the whole transaction back (the
handler's session work too) and the run is recorded, in a transaction of
its own, as a retryable failure saying so (a ``dead`` stays ``dead``, its
``on_dead`` owed), without calling a hook again; a ``KeyboardInterrupt``
rolls it back the same way, stops the worker and releases the run.  Not
called here for a job whose stored payload cannot be decoded.  Every
transition to ``dead`` that is not a worker's own run (a stale recovery,
an undelivered cancel, an operator action) gets its ``on_dead`` through
:mod:`venturi_sa.owed_calls`.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session

from venturi_sa.declarations.task_contexts import OutcomeFacts
from venturi_sa.states import Outcome
from venturi_sa.storage.params import FinishParams
from venturi_sa.task import Task
from venturi_sa.worker.run import Run

HOOK_NAMES = {Outcome.COMPLETED: "on_complete", Outcome.RETRIED: "on_retry", Outcome.DEAD: "on_dead"}


OutcomeContext = OutcomeFacts
"""What an outcome hook sees (``venturi_sa.worker.OutcomeContext``): the record an owed call builds too."""


def hook_name(run: Run) -> str | None:
    """The name of the outcome hook this run's task overrides for its outcome, or None."""
    if run.task is None or run.params is None:
        return None
    name = HOOK_NAMES.get(run.params.outcome)
    if name is None or getattr(type(run.task), name) is getattr(Task, name):
        return None
    return name


def has_hook(run: Run) -> bool:
    """Whether the run's task overrides the hook of the outcome it decided (so it is written in a session)."""
    return hook_name(run) is not None


def hook_call(run: Run, params: FinishParams, recorded: Outcome) -> Callable[[Session], None] | None:
    """``call(session)`` running the task's hook for ``params`` as recorded (None if there is none to run).

    ``recorded`` is the outcome the fenced write reported for the run's
    fence.  Where it is not ``params.outcome`` (a stored cancel turned the
    run's ``retried`` or ``paused`` into ``dead``), no hook runs here: that
    statement owed the ``on_dead`` call, which :mod:`venturi_sa.owed_calls`
    makes once.
    """
    if recorded is not params.outcome:
        return None
    name = hook_name(run)
    if name is None:
        return None
    method = getattr(run.task, name)
    argument = params.attachment if params.outcome is Outcome.COMPLETED else params.note

    def call(session: Session) -> None:
        ctx = OutcomeContext(job_id=run.job.id, kind=run.job.kind, run_count=run.job.run_count,
                             failure_count=run.job.failure_count + (1 if params.failure else 0),
                             outcome=params.outcome, note=params.note, result=params.attachment,
                             carry=run.ctx.carry, session=session, log=run.ctx.log)
        with run.hooks.around(run.ctx):
            method(ctx, argument)

    return call
