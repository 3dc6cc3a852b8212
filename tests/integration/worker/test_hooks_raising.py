"""A hook that raises anything cannot strand a job ``claimed``: a real worker, real PostgreSQL.

``on_complete``, ``on_retry`` and ``on_dead`` raising ``SystemExit`` (or
``GeneratorExit``, or any other ``BaseException``) roll their transaction
back and the run is recorded in a transaction of its own; an ``on_outcome``
run hook raising them is logged and the outcome written.  Every lease here
is far longer than the test waits, so only a written outcome ends a claim.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from support.probes import running, settled
from support.waiting import wait_until
from support.workers import enqueue, journal

from venturi_sa import Die, JobContext, Queue, Task, Worker
from venturi_sa.run_hooks import RunHooks
from venturi_sa.storage.params import FinishParams
from venturi_sa.worker.outcome_hooks import OutcomeContext

LONG = timedelta(minutes=10)


class Quit(BaseException):
    """A ``BaseException`` that is neither ``Exception`` nor one Python names."""


def _raiser(kind: type[BaseException]) -> BaseException:
    return SystemExit("the hook exits") if kind is SystemExit else kind("the hook gives up")


def _worker(queue: Queue, engine: sa.Engine, batch: bool = True) -> Worker:
    return Worker(queue, engine, poll_interval=0.05, listen=False, recover_interval=0.1, batch_outcomes=batch)


def _queue(models: Any, *tasks: type[Task], hooks: RunHooks | None = None) -> Queue:
    queue = Queue(models, list(tasks))
    if hooks is not None:
        queue.run_hooks = queue.run_hooks + hooks
    return queue


@pytest.mark.parametrize("raised", [SystemExit, GeneratorExit, Quit])
def test_on_complete_raising_ends_the_job_unclaimed(engine: sa.Engine, models: Any,
                                                    raised: type[BaseException]) -> None:
    class Report(Task):
        KIND = "report"
        max_failures = 1  # the hook's failure is the run's last: the job ends dead, not claimed
        lease = LONG

        def run(self, ctx: JobContext) -> Any:
            return "done"

        def on_complete(self, ctx: OutcomeContext, result: Any) -> None:
            raise _raiser(raised)

    queue = _queue(models, Report)
    [job_id] = enqueue(engine, queue, Report())
    with running(_worker(queue, engine)):
        row = settled(engine, models, job_id)
    assert (row.status, row.claimed_by) == ("dead", None)
    [entry] = journal(engine, models, job_id)
    assert entry.outcome == "dead" and "Report.on_complete raised" in entry.note


def test_on_retry_raising_system_exit_records_the_retry_and_the_job_runs_again(engine: sa.Engine,
                                                                               models: Any) -> None:
    class Flaky(Task):
        KIND = "flaky"
        max_failures = 5
        lease = LONG

        @classmethod
        def backoff(cls, failures: int) -> timedelta:
            return timedelta(0)

        def run(self, ctx: JobContext) -> Any:
            if ctx.run_count == 1:
                raise RuntimeError("first run fails")
            return "ok"

        def on_retry(self, ctx: OutcomeContext, note: str | None) -> None:
            sys.exit("on_retry exits")

    queue = _queue(models, Flaky)
    [job_id] = enqueue(engine, queue, Flaky())
    with running(_worker(queue, engine)):
        row = settled(engine, models, job_id)
    assert (row.status, row.claimed_by) == ("completed", None)
    first, second = journal(engine, models, job_id)
    assert first.outcome == "retried" and "Flaky.on_retry raised SystemExit" in first.note
    assert second.outcome == "completed"


def test_on_dead_raising_system_exit_still_ends_the_job_dead_and_owes_the_call(engine: sa.Engine,
                                                                                models: Any) -> None:
    """The worker's own ``on_dead`` exits: the job is recorded ``dead`` (no hook) owing the call, made once later.

    (Only the first call exits: an owed call raising ``SystemExit`` is the
    owed caller's to survive, ``venturi_sa/owed_calls.py``, not this test's.)
    """
    calls: list[str] = []

    class Doomed(Task):
        KIND = "doomed"
        lease = LONG

        def run(self, ctx: JobContext) -> Any:
            return Die("no way")

        def on_dead(self, ctx: OutcomeContext, note: str | None) -> None:
            calls.append(note or "")
            if len(calls) == 1:
                sys.exit("on_dead exits")

    queue = _queue(models, Doomed)
    [job_id] = enqueue(engine, queue, Doomed())
    with running(_worker(queue, engine)):
        row = settled(engine, models, job_id)
        wait_until(lambda: len(calls) == 2, what="the owed on_dead call")
    assert (row.status, row.claimed_by) == ("dead", None)
    [entry] = journal(engine, models, job_id)
    assert entry.outcome == "dead" and "Doomed.on_dead raised SystemExit" in entry.note
    assert len(calls) == 2  # the exiting call (rolled back), then the owed one, once


@pytest.mark.parametrize("raised", [GeneratorExit, Quit])
@pytest.mark.parametrize("batch", [True, False])
def test_an_on_outcome_run_hook_raising_any_base_exception_still_records_the_outcome(
        engine: sa.Engine, models: Any, raised: type[BaseException], batch: bool) -> None:
    class Quick(Task):
        KIND = "quick"
        lease = LONG

        def run(self, ctx: JobContext) -> Any:
            return "done"

    def raising(ctx: JobContext, params: FinishParams) -> FinishParams | None:
        raise _raiser(raised)

    queue = _queue(models, Quick, hooks=RunHooks.of(on_outcome=raising))
    [job_id] = enqueue(engine, queue, Quick())
    with running(_worker(queue, engine, batch=batch)):
        row = settled(engine, models, job_id)
    assert (row.status, row.claimed_by) == ("completed", None)
    assert [(e.run_no, e.outcome) for e in journal(engine, models, job_id)] == [(1, "completed")]


def test_an_around_run_raising_system_exit_around_on_complete_does_not_strand_the_job(
        engine: sa.Engine, models: Any) -> None:
    """``around_run`` is entered around the outcome hook too: its ``SystemExit`` there is the hook's failure."""
    class Hooked(Task):
        KIND = "hooked"
        max_failures = 1
        lease = LONG

        def run(self, ctx: JobContext) -> Any:
            return "done"

        def on_complete(self, ctx: OutcomeContext, result: Any) -> None:
            pass

    entered: list[int] = []

    class Scope:
        def __enter__(self) -> None:
            entered.append(1)
            if len(entered) == 2:  # the handler's scope passes, the outcome hook's raises
                sys.exit("the scope exits")

        def __exit__(self, *exc: object) -> None:
            return None

    queue = _queue(models, Hooked, hooks=RunHooks.of(around_run=lambda ctx: Scope()))
    [job_id] = enqueue(engine, queue, Hooked())
    with running(_worker(queue, engine)):
        row = settled(engine, models, job_id)
    assert (row.status, row.claimed_by) == ("dead", None)
    [entry] = journal(engine, models, job_id)
    assert entry.outcome == "dead" and "raised SystemExit" in entry.note
