"""A worker fires its queue's schedules: events, Prometheus counters, stats and the ``venturi schedules`` CLI."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from support.periodic import Tick, aligned, backdate, db_now, jobs_of, schedule_row, tick_queue
from support.waiting import Events
from support.workers import running

from venturi_sa import Models, Worker
from venturi_sa.cli import cli
from venturi_sa.metrics import PrometheusMetrics
from venturi_sa.periodic import reconcile

HOUR = timedelta(hours=1)


def test_a_running_worker_fires_a_due_schedule_once_and_counts_it(engine: sa.Engine, models: Models) -> None:
    queue = tick_queue(models.prefix)
    queue.schedule(Tick(n=5), every=HOUR, name="hourly", priority=0)
    reconcile(queue, engine)
    backdate(engine, models, "hourly", aligned(db_now(engine), HOUR) - 3 * HOUR)  # three hours down
    events, registry = Events(), CollectorRegistry()
    metrics = PrometheusMetrics(registry=registry)

    def hook(name: str, data: dict[str, Any]) -> None:
        events(name, data)
        metrics(name, data)

    with running(Worker(queue, engine, poll_interval=0.2, on_event=hook)):
        _, fired = events.wait_for("schedule_fired", schedule="hourly")
        events.wait_for("finished", kind="tick")
    assert fired == {"queue": models.prefix, "schedule": "hourly", "count": 1}
    labels = {"queue": models.prefix, "schedule": "hourly"}
    assert registry.get_sample_value("venturi_schedule_fires_total", labels) == 1
    assert registry.get_sample_value("venturi_schedule_skips_total", labels) == 3  # catch-up "latest"
    (job,) = jobs_of(engine, models)
    assert (job.payload, job.priority, job.status) == ({"n": 5}, 0, "completed")
    row = schedule_row(engine, models, "hourly")
    assert row.last_job == job.id and row.next_at > db_now(engine)
    stats = queue.stats(engine)
    assert [(s.name, s.last_status, s.fired, s.skipped) for s in stats.schedules] == [
        ("hourly", "completed", 1, 3)]


def test_run_until_idle_does_not_fire_schedules(engine: sa.Engine, models: Models) -> None:
    queue = tick_queue(models.prefix)
    queue.schedule(Tick(n=1), every=HOUR, name="hourly")
    reconcile(queue, engine)
    backdate(engine, models, "hourly", aligned(db_now(engine), HOUR) - HOUR)
    Worker(queue, engine).run_until_idle()
    assert jobs_of(engine, models) == []


def test_cli_lists_runs_pauses_and_resumes_schedules(engine: sa.Engine, models: Models, pg_url: str) -> None:
    queue = tick_queue(models.prefix)
    queue.schedule(Tick(n=1), cron="0 3 * * *", tz="Europe/Berlin", name="nightly")
    reconcile(queue, engine)
    runner = CliRunner()

    def venturi(*args: str) -> str:
        result = runner.invoke(cli, [*args, "--dsn", pg_url, "--prefix", models.prefix], prog_name="venturi")
        assert result.exit_code == 0, result.output
        return result.output

    listing = venturi("schedules")
    assert "nightly" in listing and "cron:0 3 * * *" in listing and "Europe/Berlin" in listing
    assert "active" in listing
    out = venturi("schedules", "run", "nightly")
    job_id = out.split()[-1]
    assert out.startswith("fired schedule nightly: job ") and [j.id for j in jobs_of(engine, models)] == [job_id]
    venturi("schedules", "pause", "nightly")
    (info,) = json.loads(venturi("schedules", "--json"))
    assert (info["paused"], info["last_job"], info["last_status"], info["fired"]) == (True, job_id, "pending", 1)
    venturi("schedules", "resume", "nightly")
    assert "nightly" in venturi("stats")
    failed = runner.invoke(cli, ["schedules", "run", "nope", "--dsn", pg_url, "--prefix", models.prefix])
    assert failed.exit_code == 1 and "no schedule named 'nope'" in failed.output and "Traceback" not in failed.output
