"""A run's lifecycle, from claim to recorded outcome, in one place.

An executor thread hands each claimed run to :meth:`RunPipeline.handle`,
which takes it through these steps, in this order:

1. **prepare** (:func:`~venturi_sa.worker.pipeline_stages.prepare`): resolve the
   task type, decode the payload and the carry; poison input ends ``dead``.
2. **execute** (:func:`~venturi_sa.worker.pipeline_stages.execute`): call the
   handler under its time limit (:func:`~venturi_sa.worker.cancel.time_limit`).
   An ``async def`` handler runs as a task on the worker's loop and this
   thread waits for that task itself, so the run is not over until the
   coroutine, its ``except CancelledError``/``finally`` code included, is.
3. **classify** (:func:`~venturi_sa.worker.pipeline_stages.classify`): the return
   value or exception becomes a validated ``FinishParams``.
4. **apply control** (:func:`~venturi_sa.worker.pipeline_stages.control`): a cancel
   or a time limit that reached the run replaces that outcome.

   Steps 1-4 are :func:`decide`, the one place a run decides its outcome
   (a cancel the run read included); whether a cancel it never read
   overrides that is decided by the write (step 5), nowhere else.
   When the persist step refuses an outcome (the handler's session work
   cannot commit, or an outcome hook raised), it says why and
   :func:`refused` decides the retryable failure recorded instead.
5. **persist** (:meth:`~venturi_sa.worker.completer.Completer.persist`): the
   completer chooses the batch (most runs) or the handler's ``ctx.session``
   transaction, and retries the fenced write on any error while the lease
   lasts; only a fenced-out write is final.  The write reports the outcome
   it recorded (``run.recorded``): the run's own, or ``dead`` where a cancel
   request the run never read turned a ``retried``/``paused``/``released``
   (``storage.outcomes.undelivered_cancel``, the one owner of that rule).
   Everything after the write follows ``run.recorded``, exactly once.
6. **wake** (:func:`~venturi_sa.worker.pipeline_stages.wake`): a run
   suspended in a wait whose ``paused`` was recorded looks for its signal,
   in the persist transaction, after the fenced write.
7. **hooks**: ``on_complete``/``on_retry``/``on_dead`` of the recorded
   outcome run inside that persist transaction
   (:mod:`~venturi_sa.worker.outcome_hooks`); then the commit, the journal's
   log line and the ``finished`` event (metrics) of the recorded outcome.
8. **release the slot** (:meth:`~venturi_sa.worker.inflight.InFlight.free_slot`),
   here, once the handler has truly ended, and nowhere else for a run that
   started.

Before step 1, a run whose lease may have run out by this worker's own
clock (claimed, or last renewed, more than its lease ago less a margin: the
process was paused between claim and start) or whose claim the lease keeper
found gone is not started: its slot is freed, one warning is logged, it is
reported given up (``finished``, not recorded) and nothing is written for
it; the lease's recovery records ``stale-recovered``.

Whatever the run's user code raises (``SystemExit`` included) becomes its
recorded failure, except ``KeyboardInterrupt``: as a Ctrl-C would, it
stops the worker, and the run is released (no failure counted).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from venturi_sa.owed_calls import overrides_on_dead
from venturi_sa.run_hooks import NOTHING
from venturi_sa.states import Outcome
from venturi_sa.storage.params import FinishParams
from venturi_sa.task import Registry
from venturi_sa.worker.cancel import time_limit
from venturi_sa.worker.completer import Completer, Persist, Refused
from venturi_sa.worker.inflight import InFlight, Start
from venturi_sa.worker.joblog import current_job
from venturi_sa.worker.pipeline_stages import (
    Awaiter,
    absorb,
    await_on_loop,
    classify,
    close_quietly,
    control,
    exception_note,
    execute,
    failure,
    note_text,
    prepare,
)
from venturi_sa.worker.run import Run

logger = logging.getLogger("venturi_sa.worker")
SESSION_ATTEMPTS = 3  # executions of a ctx.session handler whose commit a transient fault lost

NOT_RUN = object()
"""What :func:`decide` returns for a run that ended before its handler was called (poison input, a cancel)."""


def decide(run: Run, registry: Registry, awaiter: Awaiter = await_on_loop) -> Any:
    """Steps 1-4: prepare, execute, classify, apply control; sets ``run.params`` and ``run.duration``.

    Returns what the handler returned or raised (``NOT_RUN`` if it was not
    called), for callers that want it, such as the testing helpers.  An
    ``async def`` handler is awaited through ``awaiter``: on the worker's loop
    under its time limit, or (:func:`~venturi_sa.worker.pipeline_stages.await_here`,
    the testing helpers) on the caller's loop, where no time limit is armed.
    """
    started = time.monotonic()
    result: Any = NOT_RUN
    try:
        token = current_job.set(run.job)  # as joblog.running(), without a generator per run
        try:
            params = prepare(run, registry)
            if params is None and not run.ctx.cancelled:  # cancelled before it started: never run
                with time_limit(run) if awaiter is await_on_loop else NOTHING:
                    result = execute(run, awaiter)
                params = classify(run, result)
            run.params = control(run) or params
        finally:
            current_job.reset(token)
    except BaseException as exc:  # noqa: BLE001 - the catch-all: whatever broke, the run ends in an outcome
        absorb(exc)
        logger.exception("job %s: unexpected error in the run pipeline", run.job.id)
        run.failed = True
        run.params = failure(run, f"venturi could not finish the run: {exception_note(exc)}")
        result = exc
    finally:
        run.duration = time.monotonic() - started
    if run.params is not None and run.hooks.on_outcome:  # e.g. a tracing span ends with the outcome
        run.params = run.hooks.outcome(run.ctx, run.params)
    return result


def refused(run: Run, why: Refused) -> FinishParams:
    """The outcome recorded when persist refused ``run.params`` (nothing of the run's session was committed).

    A ``dead`` outcome stays ``dead`` (a ``Die()`` is not retried because its
    ``on_dead`` raised); anything else becomes a retryable failure saying why,
    except that a handler that raised keeps the failure it was classified
    with.  A ``dead`` result whose task overrides ``on_dead`` owes that call:
    the next worker of its kind makes it (:mod:`venturi_sa.owed_calls`).
    """
    params = run.params
    assert params is not None
    decided = params if params.outcome is Outcome.DEAD or (why.keep_failure and params.failure) else (
        failure(run, why.note))
    owe = decided.outcome is Outcome.DEAD and run.task_type is not None and overrides_on_dead(run.task_type)
    kept_dead = decided is params and params.outcome is Outcome.DEAD  # its note says why it was refused
    if not owe and not kept_dead:
        return decided
    note = note_text(f"{decided.note}; {why.note}" if decided.note else why.note) if kept_dead else decided.note
    return dataclasses.replace(decided, note=note, owe_on_dead=owe)


class RunPipeline:
    """Runs claimed runs through :func:`decide`, the completer and the slot release (see the module)."""

    def __init__(self, registry: Registry, inflight: InFlight, completer: Completer,
                 interrupted: Callable[[], None], lost: Callable[[Run, float], None] | None = None) -> None:
        self.registry = registry
        self.inflight = inflight
        self.completer = completer
        self.interrupted = interrupted  # the worker's stop, for a KeyboardInterrupt from user code
        self.lost = lost  # lost(run, overdue): a run dropped before its start (the worker's event)

    def handle(self, run: Run) -> None:
        """The whole lifecycle of one run, on the calling executor thread."""
        now = time.monotonic()
        start = self.inflight.start(run, now)
        if start is not Start.RUN:  # released at shutdown, or its lease may be gone: never started
            self.inflight.free_slot(run)
            if start is Start.LOST:
                self._dropped(run, now - run.start_deadline)
            return
        reported = False
        try:
            reported = self._decide_and_persist(run)
        except KeyboardInterrupt:
            run.ctx.log.warning("job %s run %d raised KeyboardInterrupt: released, and the worker stops",
                                run.job.id, run.job.run_count)
            self.completer.report(run, self.completer.release(run, "released: its handler raised "
                                                                   "KeyboardInterrupt, which stops the worker"))
            reported = True
            self.interrupted()
        except BaseException:  # noqa: BLE001 - never lose a slot or a thread
            logger.exception("unexpected error finishing job %s run %d", run.job.id, run.job.run_count)
        finally:
            close_quietly(run.ctx.take_session())
            self.inflight.free_slot(run)  # step 8: the handler has ended, whatever happened
            if not reported and not run.released:
                self.completer.report(run, False)

    def _dropped(self, run: Run, overdue: float) -> None:
        """A run not started because its claim may be gone: logged, reported given up; no outcome is written.

        Its job's recovery records ``stale-recovered`` (or has already, and
        another worker may have run it); writing anything here could only be
        fenced out, or, if the job was not recovered yet, race the recovery.
        """
        why = ("the lease keeper found its claim gone" if run.ctx.lease_lost else
               f"its lease may have run out {max(0.0, overdue):.2f}s before, by this worker's clock "
               "(was the process paused?)")
        run.ctx.log.warning("job %s run %d not started: %s; dropped as lost, its outcome is left to the "
                            "lease's recovery", run.job.id, run.job.run_count, why)
        if self.lost is not None:
            self.lost(run, overdue)
        self.completer.report(run, False)

    def _decide_and_persist(self, run: Run) -> bool:
        """Steps 1-7; True once the run's result has been reported (or is with the batch)."""
        for attempt in range(1, SESSION_ATTEMPTS + 1):
            decide(run, self.registry)
            if not self.inflight.persisting(run):
                return False  # released at shutdown while it ran: nothing of it is persisted
            persisted = self.completer.persist(run, may_rerun=attempt < SESSION_ATTEMPTS)
            if isinstance(persisted, Refused):
                run.params = refused(run, persisted)
                self.completer.report(run, self.completer.write(run, run.params))
                return True
            if persisted is not Persist.RERUN:
                return True
            run.rerun()  # the session work was lost to a transient fault: run it again under the same claim
        return False
