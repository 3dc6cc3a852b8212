"""Durable sleeps, waits and signals: ``ctx.sleep``, ``ctx.wait_for``, ``queue.signal``."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.hooks import drain
from support.waiting import Events
from support.workers import enqueue, job_row, journal, running

from venturi_sa import JobContext, Queue, Suspended, Task, Worker
from venturi_sa.errors import InvalidTransition, JobNotFound, SignalConflict

runs: list[Any] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    runs.clear()


class Nap(Task):
    KIND = "nap"

    def run(self, ctx: JobContext) -> Any:
        runs.append(ctx.run_count)
        ctx.step("before", lambda: "x")
        ctx.sleep(timedelta(milliseconds=400))
        return ctx.step("after", lambda: "woke")


class Approve(Task):
    KIND = "approve"

    def run(self, ctx: JobContext) -> Any:
        runs.append(ctx.run_count)
        return {"approved": ctx.wait_for("approved", timeout=timedelta(minutes=5))}


def worker(queue: Queue, engine: sa.Engine, events: Events) -> Worker:
    return Worker(queue, engine, concurrency=2, poll_interval=0.05, on_event=events)


def test_a_sleep_pauses_the_job_and_resumes_after_its_delay(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Nap])
    [job_id] = enqueue(engine, queue, Nap())
    events = Events()
    with running(worker(queue, engine, events)):
        events.wait_for("finished", job_id=job_id, outcome="paused")
        row = job_row(engine, models, job_id)
        assert row.status == "pending"
        [sleep] = [s for s in queue.steps(engine, job_id) if s.entry == "sleep"]
        assert sleep.name == "sleep#1" and row.visible_at == sleep.wake_at
        assert journal(engine, models, job_id)[-1].note.startswith("sleeping until ")
        assert queue.explain(engine, job_id).codes[0] == "sleeping"
        events.wait_for("finished", job_id=job_id, outcome="completed")
    assert queue.result(engine, job_id) == "woke"
    assert runs == [1, 2]
    assert job_row(engine, models, job_id).failure_count == 0
    [(_, sleep_claim), (_, wake_claim)] = events.of("claimed", job_id=job_id)
    assert sleep_claim["run_count"] == 1 and wake_claim["run_count"] == 2


def test_an_early_wake_up_sleeps_again_for_the_remainder(engine: sa.Engine, models: Any) -> None:
    class Long(Task):
        KIND = "long"

        def run(self, ctx: JobContext) -> Any:
            runs.append(ctx.run_count)
            ctx.sleep(3600, name="an hour")
            return "done"

    queue = Queue(models, [Long])
    [job_id] = enqueue(engine, queue, Long())
    drain(queue, engine)
    wake_at = queue.steps(engine, job_id)[0].wake_at
    queue.retry_now(engine, job_id)
    drain(queue, engine)
    assert runs == [1, 2]
    row = job_row(engine, models, job_id)
    assert row.status == "pending" and row.visible_at == wake_at and row.failure_count == 0


def test_a_committed_signal_wakes_the_wait_a_rolled_back_one_never(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Approve])
    [job_id] = enqueue(engine, queue, Approve())
    events = Events()
    with running(worker(queue, engine, events)):
        events.wait_for("finished", job_id=job_id, outcome="paused")
        assert job_row(engine, models, job_id).visible_at > job_row(engine, models, job_id).created_at
        explained = queue.explain(engine, job_id)
        assert explained.codes[0] == "waiting_for_signal" and "'approved'" in explained.reasons[0].text
        with Session(engine) as session:
            assert queue.signal(session, job_id, "approved", {"by": "nobody"}).result == "woke"
            session.rollback()
        assert queue.signals(engine, job_id) == []
        mark = events.mark()
        with Session(engine) as session, session.begin():
            assert queue.signal(session, job_id, "approved", {"by": "ann"}).result == "woke"
        sent = time.monotonic()
        at, _ = events.wait_for("finished", job_id=job_id, outcome="completed", after=mark)
        assert at - sent < 1.0
    assert queue.result(engine, job_id) == {"approved": {"by": "ann"}}
    assert runs == [1, 2]
    [wait] = queue.steps(engine, job_id)
    assert (wait.entry, wait.resolution, wait.result) == ("wait", "signal", {"by": "ann"})


def test_a_signal_sent_first_is_kept_and_repeats_are_checked(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Approve])
    [job_id] = enqueue(engine, queue, Approve())
    assert queue.signal(engine, job_id, "approved", [1]).result == "stored"
    assert queue.signal(engine, job_id, "approved", [1]).result == "duplicate"
    with pytest.raises(SignalConflict):
        queue.signal(engine, job_id, "approved", [2])
    with pytest.raises(JobNotFound):
        queue.signal(engine, "no-such-job", "approved")
    drain(queue, engine)
    assert queue.result(engine, job_id) == {"approved": [1]}
    assert runs == [1]
    with pytest.raises(InvalidTransition, match="already completed"):
        queue.signal(engine, job_id, "other")


def test_a_wait_times_out_into_timeout_error_and_later_signals_are_refused(engine: sa.Engine, models: Any) -> None:
    class Short(Task):
        KIND = "short"

        def run(self, ctx: JobContext) -> Any:
            runs.append(ctx.run_count)
            try:
                ctx.wait_for("reply", timeout=0.3)
            except TimeoutError:
                return ctx.wait_for("never")  # no timeout: waits for good
            return "replied"

    queue = Queue(models, [Short])
    [job_id] = enqueue(engine, queue, Short())
    events = Events()
    with running(worker(queue, engine, events)):
        events.wait_for("finished", job_id=job_id, outcome="paused")
        events.wait_count("finished", 2)
    assert runs == [1, 2]
    [reply, never] = queue.steps(engine, job_id)
    assert (reply.resolution, never.resolution, never.wake_at) == ("timeout", None, None)
    assert job_row(engine, models, job_id).visible_at.year > 9000  # 'infinity'
    with pytest.raises(InvalidTransition, match="timed out"):
        queue.signal(engine, job_id, "reply", "late")


def test_a_swallowed_suspension_is_a_retryable_failure(engine: sa.Engine, models: Any) -> None:
    class Swallow(Task):
        KIND = "swallow"
        max_failures = 1

        def run(self, ctx: JobContext) -> Any:
            try:
                ctx.sleep(60)
            except BaseException:  # noqa: BLE001 - what the test is about
                pass
            return "returned anyway"

    queue = Queue(models, [Swallow])
    [job_id] = enqueue(engine, queue, Swallow())
    drain(queue, engine)
    assert job_row(engine, models, job_id).status == "dead"
    assert "suspension swallowed" in journal(engine, models, job_id)[-1].note


def test_session_writes_before_a_suspension_commit_with_it_and_rerun(engine: sa.Engine, models: Any) -> None:
    table = sa.Table(f"{models.prefix}_visits", sa.MetaData(), sa.Column("run", sa.Integer, primary_key=True))
    table.create(engine)

    class Visit(Task):
        KIND = "visit"

        def run(self, ctx: JobContext) -> Any:
            ctx.session.execute(table.insert().values(run=ctx.run_count))
            return ctx.wait_for("go", timeout=600)

    queue = Queue(models, [Visit])
    [job_id] = enqueue(engine, queue, Visit())
    drain(queue, engine)
    queue.signal(engine, job_id, "go", "went")
    drain(queue, engine)
    assert queue.result(engine, job_id) == "went"
    with engine.connect() as conn:
        assert sorted(r.run for r in conn.execute(sa.select(table.c.run))) == [1, 2]  # re-ran on resume


def test_a_signal_committed_while_the_run_suspends_still_wakes_it(engine: sa.Engine, models: Any) -> None:
    queue_box: list[Queue] = []

    class Racy(Task):
        KIND = "racy"

        def run(self, ctx: JobContext) -> Any:
            runs.append(ctx.run_count)
            try:
                return ctx.wait_for("go", timeout=600)
            except Suspended:
                if ctx.run_count == 1:  # the wait is recorded open; the signal commits before the outcome
                    runs.append(queue_box[0].signal(engine, ctx.job_id, "go", "raced").result)
                raise

    queue = Queue(models, [Racy])
    queue_box.append(queue)
    [job_id] = enqueue(engine, queue, Racy())
    drain(queue, engine)
    assert runs == [1, "stored", 2]
    assert queue.result(engine, job_id) == "raced"


def test_requeue_keeps_steps_unless_reset(engine: sa.Engine, models: Any) -> None:
    class Once(Task):
        KIND = "once"
        max_failures = 1

        def run(self, ctx: JobContext) -> Any:
            runs.append(ctx.step("effect", lambda: ctx.run_count))
            raise RuntimeError("fail")

    queue = Queue(models, [Once])
    [job_id] = enqueue(engine, queue, Once())
    drain(queue, engine)
    queue.requeue(engine, job_id)
    drain(queue, engine)
    queue.requeue(engine, job_id, reset_steps=True)
    drain(queue, engine)
    assert runs == [1, 1, 3]


def test_a_signal_waiting_on_the_suspension_s_row_lock_wakes_the_job(engine: sa.Engine, models: Any) -> None:
    """The signal blocks on the job row the suspending outcome write locked; after that commit it sees the wait."""
    import threading

    from support.waiting import WAIT, wait_until

    holding = threading.Event()
    go_on = threading.Event()

    class HeldCommit(Session):
        pass

    def before_commit(session: Session) -> None:
        if session.info.get("suspending"):
            holding.set()  # the outcome and the wake check are written: the job row is locked
            go_on.wait(WAIT)

    sa.event.listen(HeldCommit, "before_commit", before_commit)

    class Gate(Task):
        KIND = "gate"

        def run(self, ctx: JobContext) -> Any:
            runs.append(ctx.run_count)
            ctx.session.info["suspending"] = ctx.run_count == 1
            return ctx.wait_for("open", timeout=600)

    queue = Queue(models, [Gate], session_class=HeldCommit)
    [job_id] = enqueue(engine, queue, Gate())
    sent: list[str] = []
    with running(Worker(queue, engine, concurrency=2, poll_interval=0.05)):
        assert holding.wait(WAIT)
        signaller = threading.Thread(target=lambda: sent.append(queue.signal(engine, job_id, "open", 7).result))
        signaller.start()
        wait_until(lambda: _waiting_on_a_lock(engine), what="the signal to wait for the job row")
        go_on.set()
        signaller.join(WAIT)
        wait_until(lambda: job_row(engine, models, job_id).status == "completed", what="the woken job")
    assert sent == ["woke"] and runs == [1, 2]
    assert queue.result(engine, job_id) == 7


def _waiting_on_a_lock(engine: sa.Engine) -> bool:
    with engine.connect() as conn:
        return bool(conn.execute(sa.text(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE '%FOR KEY SHARE%'")).scalar())  # the signal's lock
