"""Outcome hooks follow the outcome actually recorded, once; a run hook's ``SystemExit`` still records one.

Regression tests: when the outcome statement turned a run's ``retried`` into
``dead`` (a cancel stored but not delivered), ``on_retry`` ran and committed
its writes and then the owed ``on_dead`` ran too; an ``on_outcome`` run hook
raising ``SystemExit`` left the job ``claimed``, with no journal row, until
its lease expired.
"""

from __future__ import annotations

import sys
import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.probes import running, settled
from support.waiting import WAIT, Events, wait_until
from support.workers import enqueue, journal

from venturi_sa import JobContext, Queue, Task, Worker, testing
from venturi_sa.run_hooks import RunHooks
from venturi_sa.storage.params import FinishParams
from venturi_sa.worker.outcome_hooks import OutcomeContext


def _calls_table(engine: sa.Engine, prefix: str) -> str:
    table = f"{prefix}_hook_calls"
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE {table} (job_id text NOT NULL, hook text NOT NULL)"))
    return table


def _calls(engine: sa.Engine, table: str, job_id: str) -> list[str]:
    with engine.connect() as conn:
        return sorted(conn.execute(sa.text(f"SELECT hook FROM {table} WHERE job_id = :j"), {"j": job_id}).scalars())


def _failing_export(table: str, gate: threading.Event) -> type[Task]:
    def note(ctx: OutcomeContext, hook: str) -> None:
        ctx.session.execute(sa.text(f"INSERT INTO {table} (job_id, hook) VALUES (:j, :h)"),
                            {"j": ctx.job_id, "h": hook})

    class Export(Task):
        KIND = "export"
        max_failures = 5
        lease = timedelta(minutes=10)  # the cancel request is not delivered by a renewal before the run ends

        def run(self, ctx: JobContext) -> None:
            gate.wait(WAIT)
            raise RuntimeError("export failed")  # retryable: the worker asks for retried

        def on_retry(self, ctx: OutcomeContext, note_text: str | None) -> None:
            note(ctx, "on_retry")

        def on_dead(self, ctx: OutcomeContext, note_text: str | None) -> None:
            note(ctx, "on_dead")

    return Export


def test_a_retry_turned_dead_by_a_stored_cancel_runs_only_on_dead_once(engine: sa.Engine, models: Any) -> None:
    """The probe: a cancel requested, not yet delivered, and the handler raises.

    The job ends ``dead`` exactly once, ``on_retry`` is not called (nothing
    of it commits), ``on_dead`` runs exactly once (the owed call), and the
    ``finished`` event (what metrics count) says ``dead``.  A completer
    that trusted ``params.outcome`` instead of what the write recorded
    would call ``on_retry`` here and fail this test.
    """
    table = _calls_table(engine, models.prefix)
    gate = threading.Event()
    queue = Queue(models, [_failing_export(table, gate)])
    [job_id] = enqueue(engine, queue, queue.registry.get("export")())
    events = Events()
    worker = Worker(queue, engine, poll_interval=0.2, listen=False, recover_interval=0.1, on_event=events)
    try:
        with running(worker):
            events.wait_for("claimed", job_id=job_id)
            queue.cancel(engine, job_id, "not needed", actor="bob")  # stored: the running handler has not read it
            gate.set()
            row = settled(engine, models, job_id)
            wait_until(lambda: _calls(engine, table, job_id), what="the on_dead call")
            events.wait_for("finished", job_id=job_id)
    finally:
        gate.set()
    assert row.status == "dead"
    [last] = journal(engine, models, job_id)  # one entry: dead, once
    assert (last.run_no, last.outcome, last.note.startswith("cancelled by bob")) == (1, "dead", True)
    assert _calls(engine, table, job_id) == ["on_dead"]  # no on_retry for a retry that was not recorded
    with engine.connect() as conn:
        owed = conn.execute(sa.select(sa.func.count()).select_from(models.on_dead_table)
                            .where(models.on_dead_table.c.job_id == job_id)).scalar_one()
    assert owed == 0  # the owed on_dead call was made and settled
    [(_, finished)] = events.of("finished", job_id=job_id)
    assert (finished["outcome"], finished["recorded"]) == ("dead", True)


@pytest.mark.parametrize("batch_outcomes", [True, False])
def test_a_batched_retry_turned_dead_is_reported_dead(engine: sa.Engine, models: Any,
                                                       batch_outcomes: bool) -> None:
    """Without hooks or ctx.session the outcome goes through the batch: its event follows the recorded ``dead``."""
    gate = threading.Event()

    class Plain(Task):
        KIND = "plain"
        max_failures = 5
        lease = timedelta(minutes=10)

        def run(self, ctx: JobContext) -> None:
            gate.wait(WAIT)
            raise RuntimeError("plain failed")

    queue = Queue(models, [Plain])
    [job_id] = enqueue(engine, queue, Plain())
    events = Events()
    worker = Worker(queue, engine, poll_interval=0.2, listen=False, on_event=events, batch_outcomes=batch_outcomes)
    try:
        with running(worker):
            events.wait_for("claimed", job_id=job_id)
            queue.cancel(engine, job_id, "not needed", actor="bob")
            gate.set()
            events.wait_for("finished", job_id=job_id)
    finally:
        gate.set()
    [(_, finished)] = events.of("finished", job_id=job_id)
    assert (finished["outcome"], finished["recorded"]) == ("dead", True)
    assert [(e.run_no, e.outcome) for e in journal(engine, models, job_id)] == [(1, "dead")]


def test_the_testing_drain_follows_the_recorded_outcome_too(engine: sa.Engine, models: Any) -> None:
    table = _calls_table(engine, models.prefix)
    gate = threading.Event()
    gate.set()
    queue = Queue(models, [_failing_export(table, gate)])
    [job_id] = enqueue(engine, queue, queue.registry.get("export")())
    with engine.begin() as conn:  # a cancel request stored for a claimed run, not delivered to it
        conn.execute(sa.insert(models.cancels_table).values(job_id=job_id, run_no=1, actor="bob",
                                                            note="not needed"))
    with Session(engine) as session, session.begin():
        result = testing.drain(session, queue, fail_fast=False, recursive=False)
        assert [r.outcome.value for r in result.runs] == ["dead"]
        hooks = list(session.execute(sa.text(f"SELECT hook FROM {table}")).scalars())
        assert hooks == []  # on_retry was not called; on_dead is owed, as from a worker
        owed = session.execute(sa.select(sa.func.count()).select_from(models.on_dead_table)
                               .where(models.on_dead_table.c.job_id == job_id)).scalar_one()
        assert owed == 1
        session.rollback()


@pytest.mark.parametrize("batch_outcomes", [True, False])
def test_a_run_hook_raising_system_exit_still_records_the_outcome(engine: sa.Engine, models: Any,
                                                                   batch_outcomes: bool) -> None:
    class Quick(Task):
        KIND = "quick"
        lease = timedelta(minutes=10)  # far longer than the test waits: only a written outcome ends the claim

        def run(self, ctx: JobContext) -> Any:
            return "done"

    raised = threading.Event()

    def exiting(ctx: JobContext, params: FinishParams) -> FinishParams | None:
        raised.set()
        sys.exit("the tracer shut down")

    queue = Queue(models, [Quick])
    queue.run_hooks = queue.run_hooks + RunHooks.of(on_outcome=exiting)
    [job_id] = enqueue(engine, queue, Quick())
    with running(Worker(queue, engine, poll_interval=0.05, batch_outcomes=batch_outcomes)):
        row = settled(engine, models, job_id)
    assert raised.is_set()
    assert row.status == "completed" and row.claimed_by is None
    assert [(e.run_no, e.outcome) for e in journal(engine, models, job_id)] == [(1, "completed")]
    assert queue.result(engine, job_id) == "done"
