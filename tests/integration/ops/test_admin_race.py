"""An operator's release racing the worker that still runs the job.

The operator's ``release`` and the worker's outcome write both guard on the
claim; whichever commits first wins and the other changes nothing.  The
business row the handler writes through ``ctx.session`` follows the outcome.
"""

from __future__ import annotations

import threading

import sqlalchemy as sa
from support.queues import outcomes, side_rows, side_table, side_write
from support.waiting import wait_until
from support.workers import enqueue, job_row, running

import venturi_sa as v


def test_release_while_running_discards_the_late_outcome_and_its_session_work(engine, models) -> None:  # type: ignore[no-untyped-def]
    side = side_table(engine, models.prefix)
    gate = threading.Event()
    started = threading.Event()

    class Slow(v.Task):
        KIND = "admin_race_slow"

        def run(self, ctx: v.JobContext) -> v.Complete:
            side_write(ctx.session, side, ctx.job_id, ctx.run_count, "late" if ctx.run_count == 1 else "")
            if ctx.run_count == 1:
                started.set()
                gate.wait(20)
            return v.Complete(f"run {ctx.run_count}")

    queue = v.Queue(models, [Slow])
    (job_id,) = enqueue(engine, queue, Slow())
    with running(v.Worker(queue, engine, concurrency=2, poll_interval=0.2)):
        assert started.wait(20)
        released = queue.release(engine, job_id, note="worker host is gone")
        assert released.status == "pending"
        gate.set()  # the first run now finishes: its fence is broken
        wait_until(lambda: job_row(engine, models, job_id).status == "completed", what="rerun completed")
    row = job_row(engine, models, job_id)
    assert (row.run_count, row.failure_count) == (2, 0)
    assert outcomes(engine, models, job_id) == ["released", "completed"]
    assert [(r.run_no, r.note) for r in side_rows(engine, side)] == [(2, "")]  # run 1's write rolled back


def test_release_after_the_outcome_is_refused(engine, models) -> None:  # type: ignore[no-untyped-def]
    class Quick(v.Task):
        KIND = "admin_race_quick"

        def run(self, ctx: v.JobContext) -> None:
            return None

    queue = v.Queue(models, [Quick])
    (job_id,) = enqueue(engine, queue, Quick())
    assert v.Worker(queue, engine, concurrency=1).run_until_idle() == 1
    try:
        queue.release(engine, job_id)
    except v.InvalidTransition as exc:
        assert "completed" in str(exc)
    else:
        raise AssertionError("release of a completed job was accepted")
    with engine.connect() as conn:
        status = conn.execute(sa.select(models.jobs_table.c.status)).scalar_one()
    assert status == "completed" and outcomes(engine, models, job_id) == ["completed"]
