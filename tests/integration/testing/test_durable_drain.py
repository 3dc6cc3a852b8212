"""drain with durable steps: sleeps elapse on the test clock, ``testing.signal`` wakes a wait."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa import JobContext, Models, Queue, Task
from venturi_sa.testing import clock, drain, signal

seen: list[Any] = []


class Reminder(Task):
    KIND = "reminder"

    def run(self, ctx: JobContext) -> Any:
        seen.append(ctx.run_count)
        ctx.sleep(timedelta(days=1))
        answer = ctx.wait_for("answer", timeout=timedelta(days=7))
        return {"answer": answer}


def test_drain_elapses_sleeps_and_signal_wakes_the_wait(engine: sa.Engine, models: Models) -> None:
    queue = Queue(models, [Reminder])
    seen.clear()
    with Session(engine) as s, s.begin():
        before = clock(s).now()
        job = queue.enqueue(s, Reminder())
        result = drain(s, queue)
        assert (result.total, result.paused) == (2, 2)  # asleep, then woken a day later into the wait
        assert seen == [1, 2]
        [sleep, wait] = _steps(s, models, job.id)
        assert sleep.wake_at - before >= timedelta(days=1)
        assert wait.resolution is None
        assert signal(s, queue, job.id, "answer", "yes").result == "woke"
        drain(s, queue)
        assert seen == [1, 2, 3, 4]  # the clock is real again: asleep once more, elapsed, answered
        assert job.status == "completed"
        s.rollback()


def _steps(s: Session, models: Models, job_id: str) -> list[Any]:
    c = models.steps_table.c
    return list(s.execute(sa.select(c.name, c.wake_at, c.resolution).where(c.job_id == job_id)
                          .order_by(c.started_at)))


def test_perform_runs_steps_unrecorded_and_reports_a_suspension_as_paused() -> None:
    from venturi_sa.testing import perform

    class Nap(Task):
        KIND = "perform_nap"

        def run(self, ctx: JobContext) -> Any:
            seen.append(ctx.step("a", lambda: "ran"))
            ctx.sleep(10)

    seen.clear()
    performed = perform(Nap())
    assert seen == ["ran"]
    assert (performed.outcome.value, performed.note, performed.error) == ("paused", "sleeping (sleep#1)", None)
