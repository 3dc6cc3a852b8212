"""Defect 5: a transient error at the outcome write is retried; a succeeded job is not rerun or killed.

The fault is injected deterministically by a trigger on the journal table
that fails the first ``completed`` INSERT once (``kit.fail_once_trigger``):
either as a lock timeout (SQLSTATE 55P03) or by terminating the writing
backend.  Every later write succeeds.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from support.probes import fail_once_trigger, faults_fired, outcomes, rows, running, settled, side_table, side_write
from support.waiting import Events
from support.workers import enqueue

from venturi_sa import Complete, JobContext, Queue, Task, Worker


def make_task(side: str | None) -> type[Task]:
    class Once(Task):
        KIND = "once"
        max_failures = 1  # one counted failure and the job is dead
        lease = timedelta(seconds=1)

        def run(self, ctx: JobContext) -> Complete:
            if side is not None:
                side_write(ctx.session, side, ctx.job_id, ctx.run_count, "done")
            return Complete("handler succeeded")

    return Once


# Regression test of defect 5 (worker hardening issue): failed on e53c386.
@pytest.mark.parametrize("fault", ["lock_timeout", "terminated"])
def test_batched_outcome_write_is_retried(engine: sa.Engine, models: Any, prefix: str, fault: str) -> None:
    fail_once_trigger(engine, prefix, fault)
    Once = make_task(side=None)
    queue = Queue(models, [Once])
    [job_id] = enqueue(engine, queue, Once())
    events = Events()
    worker = Worker(queue, engine, concurrency=2, poll_interval=0.1, listen=False, recover_interval=0.1,
                    on_event=events)
    with running(worker):
        row = settled(engine, models, job_id)
    assert faults_fired(engine, prefix) >= 1, "the injected fault never fired"
    assert (row.status, row.run_count, row.failure_count) == ("completed", 1, 0), (
        f"status {row.status}, run_count {row.run_count}, failure_count {row.failure_count}; "
        f"journal {outcomes(engine, models, job_id)}")
    assert outcomes(engine, models, job_id) == [(1, "completed")]


# Regression test of defect 5 (worker hardening issue): failed on e53c386.
@pytest.mark.parametrize("fault", ["lock_timeout", "terminated"])
def test_session_outcome_write_failure_does_not_kill_a_succeeded_job(engine: sa.Engine, models: Any,
                                                                      prefix: str, fault: str) -> None:
    """A ``ctx.session`` run whose outcome commit fails transiently must not be counted as the job's failure.

    Its session work is rolled back with the failed commit, so the job may
    run again; what must not happen is a handler that succeeded ending
    ``dead`` (max_failures = 1), or its session work committed twice.
    """
    fail_once_trigger(engine, prefix, fault)
    side = side_table(engine, prefix)
    Once = make_task(side)
    queue = Queue(models, [Once])
    [job_id] = enqueue(engine, queue, Once())
    worker = Worker(queue, engine, concurrency=2, poll_interval=0.1, listen=False, recover_interval=0.1)
    with running(worker):
        row = settled(engine, models, job_id)  # completed or dead (a rerun, if any, included)
    assert faults_fired(engine, prefix) >= 1, "the injected fault never fired"
    journal = outcomes(engine, models, job_id)
    assert row.status == "completed", f"status {row.status}, failure_count {row.failure_count}; journal {journal}"
    assert [o for _, o in journal].count("completed") == 1
    assert len(rows(engine, f"SELECT * FROM {side} WHERE job_id = :j", j=job_id)) == 1
