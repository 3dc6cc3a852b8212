"""Every view of a fired job names the schedule and fire time that inserted it: get_job (sync, async), CLI."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta, timezone

import sqlalchemy as sa
from click.testing import CliRunner
from support.async_engines import make_async_engine
from support.periodic import Tick, aligned, backdate, db_now, tick_queue
from support.workers import enqueue

from venturi_sa import Models
from venturi_sa.cli import cli
from venturi_sa.ops.records import FireInfo
from venturi_sa.periodic import fire_due, fired_by, reconcile

HOUR = timedelta(hours=1)


def test_get_job_reads_the_fire_with_the_row(engine: sa.Engine, models: Models, pg_url: str) -> None:
    queue = tick_queue(models.prefix)
    queue.schedule(Tick(n=1), every=HOUR, name="hourly")
    reconcile(queue, engine)
    due = aligned(db_now(engine), HOUR)
    backdate(engine, models, "hourly", due)
    ((fire_at, job_id),) = fire_due(queue, engine)[0].fires
    (plain,) = enqueue(engine, queue, Tick(n=2))

    job = queue.get_job(engine, job_id)
    assert job.fired_by is not None and job.fired_by == fired_by(models, engine, job_id)
    assert (job.fired_by.schedule, job.fired_by.fire_at) == ("hourly", fire_at) and fire_at == due
    assert job.as_dict()["fired_by"] == {"schedule": "hourly", "fire_at": due.isoformat(),
                                         "fired_at": job.fired_by.fired_at.isoformat()}
    assert queue.get_job(engine, plain).fired_by is None and fired_by(models, engine, plain) is None
    assert queue.journal(engine, job_id) == []  # the journal stays the runs' own: nothing was run yet

    async_engine = make_async_engine(pg_url, "asyncpg")
    try:
        assert asyncio.run(queue.get_job_async(async_engine, job_id)) == job
    finally:
        async_engine.sync_engine.dispose()


def test_venturi_jobs_show_names_the_schedule_and_fire_time(engine: sa.Engine, models: Models,
                                                           pg_url: str) -> None:
    queue = tick_queue(models.prefix)
    queue.schedule(Tick(n=1), cron="0 3 * * *", tz="Europe/Berlin", name="nightly")
    reconcile(queue, engine)
    job_id = queue.run_schedule_now(engine, "nightly")
    fire = queue.get_job(engine, job_id).fired_by
    assert isinstance(fire, FireInfo) and fire.schedule == "nightly"

    def show(*extra: str) -> str:
        result = CliRunner().invoke(cli, ["jobs", "show", job_id, "--dsn", pg_url, "--prefix", models.prefix,
                                          *extra])
        assert result.exit_code == 0, result.output
        return result.output

    text = show()
    when = fire.fire_at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    line = next(line for line in text.splitlines() if line.startswith("fired by:"))
    assert "schedule nightly, fire time " in line and when in line
    assert json.loads(show("--json"))["job"]["fired_by"]["schedule"] == "nightly"
    (plain,) = enqueue(engine, queue, Tick(n=2))
    result = CliRunner().invoke(cli, ["jobs", "show", plain, "--dsn", pg_url, "--prefix", models.prefix])
    assert next(line for line in result.output.splitlines() if line.startswith("fired by:")).split() == [
        "fired", "by:", "-"]
