"""A wait's deadline is decided on the database clock: a signal at or after it is refused, the wait times out.

Regression tests: a signal sent after the deadline but before the next run
answered ``"woke"`` and the wait returned its payload.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.hooks import drain
from support.waiting import wait_until
from support.workers import job_row

from venturi_sa import JobContext, Queue, Task
from venturi_sa.errors import InvalidTransition

runs: list[Any] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    runs.clear()


class Reply(Task):
    KIND = "reply"

    def run(self, ctx: JobContext) -> Any:
        runs.append(ctx.run_count)
        try:
            return {"reply": ctx.wait_for("reply", timeout=0.5)}
        except TimeoutError:
            return "timed out"


def _deadline_passed(engine: sa.Engine, deadline: datetime) -> bool:
    """Whether the database clock has reached ``deadline`` (the clock ``queue.signal`` decides by)."""
    with engine.connect() as conn:
        return bool(conn.execute(sa.select(sa.func.clock_timestamp() >= deadline)).scalar_one())


def _suspended_past_its_deadline(engine: sa.Engine, models: Any) -> tuple[Queue, str]:
    """A job suspended in its wait, the database clock past the wait's deadline, and no run since."""
    queue = Queue(models, [Reply])
    with Session(engine) as session, session.begin():
        job_id = queue.enqueue(session, Reply()).id
    drain(queue, engine)  # the first run suspends; the job is not eligible before its deadline
    [wait] = queue.steps(engine, job_id)
    assert (wait.entry, wait.resolution) == ("wait", None) and wait.wake_at is not None
    row = job_row(engine, models, job_id)
    assert (row.status, row.visible_at) == ("pending", wait.wake_at)  # the deadline is the job's visible_at
    wait_until(lambda: _deadline_passed(engine, wait.wake_at), what="the database clock to pass the deadline")
    assert runs == [1]  # no run has seen the deadline pass
    return queue, job_id


def test_a_signal_after_the_deadline_is_refused_and_the_wait_times_out(engine: sa.Engine, models: Any) -> None:
    queue, job_id = _suspended_past_its_deadline(engine, models)
    with pytest.raises(InvalidTransition, match="timed out"):
        queue.signal(engine, job_id, "reply", "too late")
    assert queue.signals(engine, job_id) == []  # nothing was written
    drain(queue, engine)
    assert runs == [1, 2]
    assert queue.result(engine, job_id) == "timed out"  # the handler got TimeoutError
    [wait] = queue.steps(engine, job_id)
    assert (wait.resolution, wait.result) == ("timeout", None)


def test_a_late_signal_in_the_callers_session_is_refused_there(engine: sa.Engine, models: Any) -> None:
    queue, job_id = _suspended_past_its_deadline(engine, models)
    with Session(engine) as session, session.begin():
        with pytest.raises(InvalidTransition, match="timed out"):
            queue.signal(session, job_id, "reply", "too late")
    assert queue.signals(engine, job_id) == []
    drain(queue, engine)
    assert queue.result(engine, job_id) == "timed out"


def test_the_handler_ignores_a_signal_stored_at_or_after_the_deadline(engine: sa.Engine, models: Any) -> None:
    """The handler's side decides on the stored times too: a signal row sent at the deadline (as an earlier
    version could store one) does not resolve the wait."""
    queue, job_id = _suspended_past_its_deadline(engine, models)
    [wait] = queue.steps(engine, job_id)
    with engine.begin() as conn:
        conn.execute(sa.insert(models.signals_table).values(job_id=job_id, name="reply", payload="late",
                                                            sent_at=wait.wake_at))
    drain(queue, engine)
    assert queue.result(engine, job_id) == "timed out"
    assert [w.resolution for w in queue.steps(engine, job_id)] == ["timeout"]


def test_a_signal_stored_before_the_deadline_still_wins_after_it(engine: sa.Engine, models: Any) -> None:
    """The deadline decides when the signal was sent, not when the next run comes."""
    queue = Queue(models, [Reply])
    with Session(engine) as session, session.begin():
        job_id = queue.enqueue(session, Reply()).id
    drain(queue, engine, concurrency=1)
    [wait] = queue.steps(engine, job_id)
    assert queue.signal(engine, job_id, "reply", "in time").result == "woke"
    assert wait.wake_at is not None
    wait_until(lambda: _deadline_passed(engine, wait.wake_at), what="the database clock to pass the deadline")
    drain(queue, engine)
    assert queue.result(engine, job_id) == {"reply": "in time"}
    assert runs == [1, 2]
