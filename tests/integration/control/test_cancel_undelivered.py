"""Round 3, defects 2 and 11: a cancel request outlives the run it was meant for (recovered, retried or
released before delivery: the job ends ``dead`` as cancelled), and ``on_dead`` runs exactly once for every
transition to ``dead``, whoever makes it."""

from __future__ import annotations

import threading
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.factories import factories_for
from support.probes import running, settled
from support.waiting import Events, wait_until
from support.workers import enqueue, journal

from venturi_sa import JobContext, Queue, Task, Worker
from venturi_sa.worker.outcome_hooks import OutcomeContext


def app_table(engine: sa.Engine, prefix: str) -> str:
    """``<prefix>_exports``: the application's own row that ``on_dead`` must clear."""
    table = f"{prefix}_exports"
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE {table} (job_id text NOT NULL, note text)"))
    return table


def hooked(table: str, gate: threading.Event | None = None, fail: bool = False) -> type[Task]:
    class Export(Task):
        KIND = "export"
        max_failures = 5

        def run(self, ctx: JobContext) -> None:
            if gate is not None:
                gate.wait(20)
            if fail:
                raise RuntimeError("export failed")

        def on_dead(self, ctx: OutcomeContext, note: str | None) -> None:
            ctx.session.execute(sa.text(f"INSERT INTO {table} (job_id, note) VALUES (:j, :n)"),
                                {"j": ctx.job_id, "n": note})

    return Export


def hook_calls(engine: sa.Engine, table: str, job_id: str) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(sa.text(f"SELECT note FROM {table} WHERE job_id = :j"), {"j": job_id}).scalars())


def leftovers(engine: sa.Engine, models: Any, job_id: str) -> tuple[int, int]:
    """(cancel requests, owed on_dead calls) still stored for the job."""
    with engine.connect() as conn:
        requests = conn.execute(sa.select(sa.func.count()).select_from(models.cancels_table)
                                .where(models.cancels_table.c.job_id == job_id)).scalar_one()
        owed = conn.execute(sa.select(sa.func.count()).select_from(models.on_dead_table)
                            .where(models.on_dead_table.c.job_id == job_id)).scalar_one()
    return requests, owed


# Regression test of round 3's defect 2 (recovered): failed on 748cf08 (the job went back to pending and
# another worker ran it to completed; the request row stayed).
def test_a_cancel_whose_worker_died_ends_the_job_dead_at_recovery(engine: sa.Engine, models: Any) -> None:
    table = app_table(engine, models.prefix)
    Export = hooked(table)
    queue = Queue(models, [Export])
    with Session(engine) as session, session.begin():
        JobFactory, _ = factories_for(models, session)
        job_id = JobFactory(claimed=True, kind="export", payload={}).id
    queue.cancel(engine, job_id, "customer left", actor="alice")  # its worker is alive: a request
    with engine.begin() as conn:  # the worker is SIGKILLed; its lease runs out
        conn.execute(sa.update(models.jobs_table).where(models.jobs_table.c.id == job_id)
                     .values(claim_expires_at=sa.func.now() - sa.text("interval '1 minute'")))
    with running(Worker(queue, engine, poll_interval=0.2, listen=False, recover_interval=0.1)):
        row = settled(engine, models, job_id)
        wait_until(lambda: hook_calls(engine, table, job_id), what="the owed on_dead call")
    assert row.status == "dead"
    last = journal(engine, models, job_id)[-1]
    assert last.outcome == "dead" and last.note.startswith("cancelled by alice") and "customer left" in last.note
    assert leftovers(engine, models, job_id) == (0, 0)
    assert len(hook_calls(engine, table, job_id)) == 1


def _cancel_during_run(engine: sa.Engine, models: Any, fail: bool, stop_now: bool) -> tuple[str, str]:
    table = app_table(engine, models.prefix)
    gate = threading.Event()
    Export = hooked(table, gate, fail=fail)
    queue = Queue(models, [Export])
    job_id, = enqueue(engine, queue, Export())
    events = Events()
    # listen=False and a long lease: the request is stored but not delivered before the run ends
    worker = Worker(queue, engine, poll_interval=0.2, listen=False, recover_interval=0.1, on_event=events)
    try:
        with running(worker, now=stop_now):
            events.wait_for("claimed", job_id=job_id)
            queue.cancel(engine, job_id, "not needed", actor="bob")
            if not stop_now:
                gate.set()
                settled(engine, models, job_id)
                wait_until(lambda: hook_calls(engine, table, job_id), what="the owed on_dead call")
    finally:
        gate.set()
    if stop_now:  # released at shutdown; the hook is made by the next worker of the kind
        with running(Worker(queue, engine, poll_interval=0.2, listen=False, recover_interval=0.1)):
            wait_until(lambda: hook_calls(engine, table, job_id), what="the owed on_dead call")
    assert settled(engine, models, job_id).status == "dead"
    last = journal(engine, models, job_id)[-1]
    assert last.outcome == "dead" and last.note.startswith("cancelled by bob"), last.note
    assert leftovers(engine, models, job_id) == (0, 0)
    assert len(hook_calls(engine, table, job_id)) == 1
    return job_id, table


# Regression test of round 3's defect 2 (retried): failed on 748cf08 (the job was retried and later ran).
def test_a_cancel_not_yet_delivered_when_the_run_fails_ends_the_job_dead(engine: sa.Engine, models: Any) -> None:
    _cancel_during_run(engine, models, fail=True, stop_now=False)


# Regression test of round 3's defect 2 (released): failed on 748cf08 (released back to pending).
def test_a_cancel_not_yet_delivered_when_the_run_is_released_ends_the_job_dead(
        engine: sa.Engine, models: Any) -> None:
    _cancel_during_run(engine, models, fail=False, stop_now=True)


# Regression tests of round 3's defect 11: failed on 748cf08 (on_dead never ran for operator transitions).
def test_kill_and_cancel_of_a_pending_job_run_on_dead_in_the_action_transaction(
        engine: sa.Engine, models: Any) -> None:
    table = app_table(engine, models.prefix)
    Export = hooked(table)
    queue = Queue(models, [Export])
    killed, cancelled = enqueue(engine, queue, Export(), Export())
    queue.kill(engine, killed, "by hand", actor="carol")
    queue.cancel(engine, cancelled, "by hand", actor="carol")
    for job_id in (killed, cancelled):  # no worker ran: the calls were made by the actions themselves
        assert len(hook_calls(engine, table, job_id)) == 1
        assert leftovers(engine, models, job_id) == (0, 0)


def test_an_action_without_the_task_code_leaves_the_call_to_a_worker_of_the_kind(
        engine: sa.Engine, models: Any) -> None:
    table = app_table(engine, models.prefix)
    Export = hooked(table)
    queue = Queue(models, [Export])
    job_id, = enqueue(engine, queue, Export())
    Queue(models, []).kill(engine, job_id, "from a console without the app")  # e.g. the CLI given only a DSN
    assert hook_calls(engine, table, job_id) == [] and leftovers(engine, models, job_id) == (0, 1)
    worker = Worker(queue, engine, poll_interval=0.2, listen=False, recover_interval=0.1)
    with running(worker):
        wait_until(lambda: hook_calls(engine, table, job_id), what="the owed on_dead call")
        with running(Worker(queue, engine, poll_interval=0.2, listen=False, recover_interval=0.1)):
            wait_until(lambda: leftovers(engine, models, job_id) == (0, 0), what="the owed row to go")
    assert len(hook_calls(engine, table, job_id)) == 1


def test_stale_recovery_at_the_backstop_owes_on_dead(engine: sa.Engine, models: Any) -> None:
    table = app_table(engine, models.prefix)
    Export = hooked(table)
    Export.max_failures = 1
    queue = Queue(models, [Export])
    with Session(engine) as session, session.begin():
        JobFactory, _ = factories_for(models, session)
        job_id = JobFactory(expired=True, kind="export", payload={}, failure_count=0, run_count=1).id
    with running(Worker(queue, engine, poll_interval=0.2, listen=False, recover_interval=0.1)):
        assert settled(engine, models, job_id).status == "dead"
        wait_until(lambda: hook_calls(engine, table, job_id), what="the owed on_dead call")
    assert len(hook_calls(engine, table, job_id)) == 1 and leftovers(engine, models, job_id) == (0, 0)
