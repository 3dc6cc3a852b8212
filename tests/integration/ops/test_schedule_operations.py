"""The queue's schedule operations, sync and async, on real PostgreSQL; the former spellings warn and still work.

``list_schedules``, ``pause_schedule``, ``resume_schedule`` and
``run_schedule_now`` (and their ``*_async`` twins) do what
``venturi_sa.periodic.list_schedules``, ``set_paused`` and ``run_now`` did;
those now raise a ``DeprecationWarning`` naming the queue method, and do the same.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine
from support.async_engines import async_engine_fixture  # noqa: F401 - the async_engine fixture

from venturi_sa import Queue, ScheduleInfo, Task, VenturiError, periodic
from venturi_sa.periodic import reconcile


class Report(Task):
    KIND = "report"


def scheduled(engine: sa.Engine, models: Any) -> Queue:
    queue = Queue(models, [Report])
    queue.schedule(Report(), every=timedelta(hours=6), name="six-hourly")
    queue.schedule(Report(), cron="0 3 * * *", name="nightly")
    reconcile(queue, engine)
    return queue


def _by_name(infos: list[ScheduleInfo]) -> dict[str, ScheduleInfo]:
    return {i.name: i for i in infos}


def test_pause_resume_and_run_a_schedule(engine: sa.Engine, models: Any, caplog: pytest.LogCaptureFixture) -> None:
    queue = scheduled(engine, models)
    before = _by_name(queue.list_schedules(engine))
    assert set(before) == {"six-hourly", "nightly"} and not before["nightly"].paused
    with caplog.at_level(logging.INFO, "venturi_sa.periodic"):
        queue.pause_schedule(engine, "nightly", actor="ops")
    assert _by_name(queue.list_schedules(engine))["nightly"].paused
    assert "schedule 'nightly' of queue" in caplog.text and "paused by ops" in caplog.text
    queue.resume_schedule(engine, "nightly")
    assert not _by_name(queue.list_schedules(engine))["nightly"].paused
    job_id = queue.run_schedule_now(engine, "six-hourly")
    after = _by_name(queue.list_schedules(engine))["six-hourly"]
    assert (after.last_job, after.fired, after.next_at) == (job_id, 1, before["six-hourly"].next_at)
    assert queue.get_job(engine, job_id).fired_by.schedule == "six-hourly"  # type: ignore[union-attr]
    for refused in (queue.pause_schedule, queue.resume_schedule, queue.run_schedule_now):
        with pytest.raises(VenturiError, match="no schedule named 'nope'"):
            refused(engine, "nope")


def test_the_async_twins(engine: sa.Engine, models: Any, async_engine: AsyncEngine) -> None:
    queue = scheduled(engine, models)

    async def main() -> tuple[list[ScheduleInfo], str, list[ScheduleInfo]]:
        await queue.pause_schedule_async(async_engine, "nightly", actor="ops")
        paused = await queue.list_schedules_async(async_engine)
        job_id = await queue.run_schedule_now_async(async_engine, "six-hourly")
        await queue.resume_schedule_async(async_engine, "nightly")
        return paused, job_id, await queue.list_schedules_async(async_engine)

    paused, job_id, resumed = asyncio.run(main())
    assert _by_name(paused)["nightly"].paused and not _by_name(resumed)["nightly"].paused
    assert _by_name(resumed)["six-hourly"].last_job == job_id
    assert resumed == queue.list_schedules(engine)


def test_the_deprecated_spellings_warn_and_still_work(engine: sa.Engine, models: Any) -> None:
    queue = scheduled(engine, models)
    with pytest.warns(DeprecationWarning, match=r"use queue.pause_schedule\(engine, name\)"):
        periodic.set_paused(models, engine, "nightly", True)
    with pytest.warns(DeprecationWarning, match=r"use queue.list_schedules\(engine\)"):
        assert _by_name(periodic.list_schedules(models, engine))["nightly"].paused
    with pytest.warns(DeprecationWarning, match=r"use queue.resume_schedule\(engine, name\)"):
        periodic.set_paused(models, engine, "nightly", False)
    assert not _by_name(queue.list_schedules(engine))["nightly"].paused
    with pytest.warns(DeprecationWarning, match=r"use queue.run_schedule_now\(engine, name\)"):
        job_id = periodic.run_now(queue, engine, "six-hourly")
    assert _by_name(queue.list_schedules(engine))["six-hourly"].last_job == job_id
    with pytest.warns(DeprecationWarning), pytest.raises(VenturiError, match="no schedule named 'nope'"):
        periodic.set_paused(models, engine, "nope", True)


def test_venturi_schedules_pause_logs_its_actor(engine: sa.Engine, models: Any, pg_url: str,
                                                caplog: pytest.LogCaptureFixture) -> None:
    from click.testing import CliRunner

    from venturi_sa.cli import cli

    queue = scheduled(engine, models)
    where = ["--dsn", pg_url, "--prefix", models.prefix]
    with caplog.at_level(logging.INFO, "venturi_sa.periodic"):
        paused = CliRunner().invoke(cli, ["schedules", "pause", "nightly", "--actor", "night-shift", *where])
    assert paused.exit_code == 0, paused.output
    assert "paused schedule nightly" in paused.output and "paused by night-shift" in caplog.text
    assert _by_name(queue.list_schedules(engine))["nightly"].paused
    resumed = CliRunner().invoke(cli, ["schedules", "resume", "nightly", *where])
    assert resumed.exit_code == 0 and not _by_name(queue.list_schedules(engine))["nightly"].paused
