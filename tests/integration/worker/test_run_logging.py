"""Every log record emitted during a run carries the job id, kind and run number."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy.orm import Session

import venturi_sa as v
from venturi_sa.worker.joblog import RunContextFilter

app_log = logging.getLogger("tests.app")


class Chatty(v.Task):
    KIND = "chatty"

    def run(self, ctx: v.JobContext) -> v.Retry | None:
        app_log.warning("working on it")  # the application's own logger
        if ctx.run_count == 1:
            return v.Retry("again", delay=None)
        return None

    @classmethod
    def backoff(cls, failure_count: int):  # type: ignore[no-untyped-def]
        from datetime import timedelta

        return timedelta(0)


def test_records_of_a_run_carry_job_kind_and_run(engine, models, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    queue = v.Queue(models, [Chatty])
    with Session(engine) as session:
        job_id = queue.enqueue(session, Chatty()).id
        session.commit()
    caplog.handler.addFilter(RunContextFilter())
    with caplog.at_level(logging.INFO):
        v.Worker(queue, engine, concurrency=1, batch_outcomes=False).run_until_idle()
    app_records = [r for r in caplog.records if r.name == "tests.app"]
    assert [(r.job_id, r.kind, r.run_no) for r in app_records] == [  # type: ignore[attr-defined]
        (job_id, "chatty", 1), (job_id, "chatty", 2)]
    outcome_records = [r for r in caplog.records if r.name == "venturi_sa.job"]
    assert {r.job_id for r in outcome_records} == {job_id}  # type: ignore[attr-defined]
    assert any("retried" in r.getMessage() for r in outcome_records)
    outside = [r for r in caplog.records if r.name == "venturi_sa.worker"]
    assert outside and all(r.job_id == "-" for r in outside)  # type: ignore[attr-defined]
