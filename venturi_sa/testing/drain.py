"""Running a test's jobs inside the test's own transaction.

:func:`drain` claims the session's eligible jobs with the worker's claim
statement, runs each through the worker's pipeline in a savepoint of the
same session (so ``ctx.session`` *is* the test's session) and records its
outcome with the worker's fenced outcome write and journal row.  Handler
effects are visible to the test at once and roll back with it.  Limits
(``global_concurrency``, key and rate limits, overrides) are ignored: a
drain runs one job at a time, and every eligible job runs.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from venturi_sa.errors import InvalidOption, VenturiError
from venturi_sa.queue import Queue
from venturi_sa.states import Outcome
from venturi_sa.storage import clock as dbclock
from venturi_sa.storage import harness, throttled_claim
from venturi_sa.storage.backend import backend_for
from venturi_sa.storage.params import ClaimedJob, ClaimParams, FinishManyParams, FinishParams
from venturi_sa.testing import sleeps
from venturi_sa.testing.handler_session import HandlerSession, for_async_handler
from venturi_sa.testing.pipeline import async_begin, async_proxy, is_async_kind, new_run, run_awaiting, run_pipeline
from venturi_sa.testing.sessions import AnySession, as_session, expire_jobs
from venturi_sa.worker.outcome_hooks import hook_call
from venturi_sa.worker.pipeline_stages import exception_note, failure, wake
from venturi_sa.worker.producer import DEFAULT_LEASE
from venturi_sa.worker.run import Run

TEST_WORKER = f"venturi.testing:{os.getpid()}"
"""``claimed_by`` of the jobs a test helper runs."""
MAX_RUNS = 1000


class DrainError(VenturiError, AssertionError):
    """A drain could not finish: it ran ``max_runs`` jobs and more were eligible, or a claim vanished."""


@dataclass(frozen=True)
class DrainedRun:
    """One run a drain made: the job, its run number and the outcome recorded for it."""

    job_id: str
    kind: str
    run_no: int
    outcome: Outcome
    note: str | None


@dataclass(frozen=True)
class DrainResult:
    """How many runs ended in each outcome, and every run in the order it was made."""

    completed: int = 0
    paused: int = 0
    retried: int = 0
    dead: int = 0
    runs: tuple[DrainedRun, ...] = ()

    @property
    def total(self) -> int:
        return len(self.runs)

    @classmethod
    def of(cls, runs: Sequence[DrainedRun]) -> DrainResult:
        counts = Counter(r.outcome for r in runs)
        return cls(completed=counts[Outcome.COMPLETED], paused=counts[Outcome.PAUSED],
                   retried=counts[Outcome.RETRIED], dead=counts[Outcome.DEAD], runs=tuple(runs))


@contextmanager
def live_clock(session: Session) -> Iterator[None]:
    """Make ``now()`` the current time for the block, unless the test clock is already engaged.

    Inside one transaction ``now()`` is the transaction's start, which is
    earlier than the ``visible_at`` of jobs the test enqueued since; a
    worker's claim runs in a fresh transaction and would see them.
    """
    if dbclock.engaged(session):
        yield
        return
    dbclock.engage(session)
    try:
        yield
    except BaseException:
        try:
            dbclock.disengage(session)
        except SQLAlchemyError:
            pass  # the transaction is broken anyway; its end resets the clock
        raise
    dbclock.disengage(session)


def drain(session: AnySession, queue: Queue, *, kinds: Sequence[str] | None = None, with_scheduled: bool = False,
          recursive: bool = True, fail_fast: bool = True, max_runs: int = MAX_RUNS) -> DrainResult:
    """Run the queue's eligible jobs in ``session``'s transaction; return what happened.

    Only what ``session`` sees is run: its own uncommitted jobs, and
    committed ones.  Each job is claimed, run and recorded as a worker
    would (``run_count``, carry, fenced outcome, journal row), with
    ``ctx.session`` the test's session inside a savepoint (or, when that is
    not of the queue's ``session_class``, a session of that class on the
    same connection, in a savepoint); the task's outcome hook of the
    outcome recorded (``on_complete``/``on_retry``/``on_dead``; none where a
    stored cancel made a retry ``dead``: that ``on_dead`` is owed, as from a
    worker) runs in the session after the outcome is written; ``ctx.checkpoint()`` writes there
    too.  Nothing is committed, so it all rolls back with the test.

    ``kinds`` limits the run to some kinds.  ``with_scheduled`` also runs
    jobs scheduled for later that never ran (retries and pauses wait for
    their time: move :func:`~venturi_sa.testing.clock` for those).  A job in
    a durable sleep (``ctx.sleep``) is woken by moving the test clock to its
    wake time once nothing else is eligible (see :mod:`venturi_sa.testing.sleeps`).
    ``recursive`` keeps going, in passes, until nothing is eligible, so
    jobs enqueued by jobs and retries due at once run too; ``False`` is one
    pass over the jobs eligible at the start.  ``fail_fast`` re-raises the
    first exception a handler raises, with its traceback, and leaves that
    job (and the pass's not yet run) pending as before, instead of
    recording a retry.  Raises :class:`DrainError` after ``max_runs`` runs
    if jobs are still eligible (e.g. a handler that always pauses at once).
    An ``async def`` handler raises ``InvalidOption`` here: run it with
    :func:`~venturi_sa.testing.drain_async`, where ``ctx.session_async`` is
    the test's ``AsyncSession`` (in a savepoint, like ``ctx.session`` here),
    or, when that is not of the queue's ``async_session_class``, one of that
    class on the same connection, in a savepoint.
    """
    s = as_session(session)
    s.flush()
    names = [queue.registry.get(k).KIND for k in kinds] if kinds is not None else queue.registry.kinds
    runs: list[DrainedRun] = []
    try:
        with live_clock(s):
            while True:
                if with_scheduled:
                    harness.reveal_scheduled(queue.models, s, names)
                if len(runs) >= max_runs:
                    _check_limit(s, queue, names, max_runs)
                    break
                done = run_pass(s, queue, names, fail_fast=fail_fast, limit=max_runs - len(runs))
                runs += done
                if not done and recursive and sleeps.elapse_sleeps(s, queue, names):
                    continue  # a job sleeps: the test clock moves to its wake time
                if not done or not recursive:
                    break
    finally:
        expire_jobs(s, queue.models)
    return DrainResult.of(runs)


def _check_limit(session: Session, queue: Queue, kinds: Sequence[str], max_runs: int) -> None:
    more = _claim(session, queue, kinds, 1)
    if more:
        harness.unclaim(queue.models, session, [j.fence for j in more])
        raise DrainError(f"drain made {max_runs} runs and jobs are still eligible (e.g. {more[0].kind!r} "
                         f"{more[0].id}): a job that pauses or retries with no delay runs forever; "
                         "raise max_runs or give it a delay")


def _claim(session: Session, queue: Queue, kinds: Sequence[str], limit: int) -> list[ClaimedJob]:
    leases = {k: queue.registry.get(k).lease for k in kinds}
    throttles = {k: t for k in kinds if (t := queue.registry.get(k).throttle) is not None}  # as a worker's claim
    params = ClaimParams(worker_id=TEST_WORKER, kinds=list(kinds), limit=limit, leases=leases,
                         default_lease=DEFAULT_LEASE, throttles=throttles)
    return throttled_claim.claim(queue.models, session, params, limits=False)  # the worker's, limits ignored


def run_pass(session: Session, queue: Queue, kinds: Sequence[str], *, fail_fast: bool, limit: int,
             only: Collection[str] | None = None) -> list[DrainedRun]:
    """Claim the eligible jobs (up to ``limit``) and run them in claim order.

    With ``only``, jobs with other ids are unclaimed again untouched.  If a
    run raises (``fail_fast``), it and the rest of the pass are unclaimed.
    """
    claimed = _claim(session, queue, kinds, limit)
    if only is not None:
        harness.unclaim(queue.models, session, [j.fence for j in claimed if j.id not in only])
        claimed = [j for j in claimed if j.id in only]
    done: list[DrainedRun] = []
    for i, job in enumerate(claimed):
        try:
            done.append(run_one(session, queue, job, fail_fast=fail_fast))
        except BaseException:
            harness.unclaim(queue.models, session, [j.fence for j in claimed[i:]])
            raise
    return done


def _pipeline(session: Session, queue: Queue, job: ClaimedJob) -> tuple[Run, HandlerSession, Callable[[], Any]]:
    """The run of ``job``, its ``ctx.session`` and the call running it (awaiting an async handler)."""
    backend = backend_for(queue.models)
    if not is_async_kind(queue.registry, job.kind):
        handler = HandlerSession(session, queue.session_class)
        run = new_run(job, lambda: handler.session, queue.registry, backend, hooks=queue.run_hooks,
                      max_payload_bytes=queue.max_payload_bytes)
        return run, handler, lambda: run_pipeline(run, queue.registry)
    proxy = async_proxy(session)
    if proxy is None:
        raise InvalidOption(f"job kind {job.kind!r} has an async def handler: run it with "
                            "`await drain_async(async_session, queue)`")
    handler, handler_async = for_async_handler(session, proxy, queue.async_session_class)
    run = new_run(job, lambda: session, queue.registry, backend, open_async_session=lambda: handler_async,
                  begin=async_begin(proxy), hooks=queue.run_hooks, max_payload_bytes=queue.max_payload_bytes)
    return run, handler, lambda: run_awaiting(run, queue.registry)


def run_one(session: Session, queue: Queue, job: ClaimedJob, *, fail_fast: bool) -> DrainedRun:
    """Run one claimed job in a savepoint of ``session`` and record its outcome there."""
    run, handler, call = _pipeline(session, queue, job)
    try:
        result = call()
        assert run.params is not None
        params: FinishParams = run.params
        if run.failed:
            handler.discard()  # as the worker does: the handler's work is discarded
            if fail_fast and isinstance(result, BaseException):
                raise result
        else:
            try:
                handler.keep()
            except SQLAlchemyError as exc:
                handler.discard()
                if fail_fast:
                    raise
                params = failure(run, "could not flush the handler's session work (rolled back): "
                                      f"{exception_note(exc)}")
    finally:
        handler.close()
    # what the statement recorded: a stored cancel may have made it dead
    recorded = backend_for(queue.models).finish_many(session, FinishManyParams(outcomes=[params])).get(params.fence)
    expire_jobs(session, queue.models)
    if recorded is None:
        raise DrainError(f"job {job.id} run {job.run_count} is no longer claimed, so its outcome "
                         f"({params.outcome.value}) was not recorded: did the handler roll back ctx.session?")
    run.recorded = recorded
    for after_write in (wake(run, params, recorded), hook_call(run, params, recorded)):
        if after_write is not None:  # a wait's wake, then Task.on_complete/on_retry/on_dead, in this transaction
            after_write(session)
    return DrainedRun(job_id=job.id, kind=job.kind, run_no=job.run_count, outcome=recorded, note=params.note)


__all__ = ["DrainError", "DrainResult", "DrainedRun", "drain", "live_clock", "run_pass"]
