"""``venturi schedules``: list the periodic-job schedules; run, pause or resume one.

The schedules are read from the database (``<prefix>_schedules``), as the
workers reconciled them; no application code is imported.  ``run NAME``
inserts one job now, in one short transaction, without moving the schedule.
"""

from __future__ import annotations

import click

from venturi_sa.cli.connect import bare_queue, opened
from venturi_sa.cli.main import VenturiGroup, cli
from venturi_sa.cli.options import actor_option, queue_options
from venturi_sa.cli.output import emit_json, table
from venturi_sa.ops.records import ScheduleInfo

HEADERS = ("name", "kind", "timing", "tz", "next", "last", "last job", "status", "state", "fired", "skipped")


def _state(info: ScheduleInfo) -> str:
    return "removed" if info.removed else "paused" if info.paused else "active"


def render_schedules(infos: list[ScheduleInfo]) -> str:
    """One line per schedule: next and last fire time (UTC), last job and its status, state, counts."""
    if not infos:
        return "no schedules (workers record the declared ones when they start)"
    rows = [[i.name, i.kind, i.timing, i.tz, i.next_at, i.last_at, i.last_job, i.last_status, _state(i), i.fired,
             i.skipped] for i in infos]
    return table(HEADERS, rows, right=("fired", "skipped"))


@cli.group(cls=VenturiGroup, invoke_without_command=True)
@queue_options
@click.pass_context
def schedules(ctx: click.Context, dsn: str | None, prefix: str, as_json: bool) -> None:
    """List the periodic-job schedules (next/last fire time, last job's status, paused)."""
    if ctx.invoked_subcommand is not None:
        return
    with opened(dsn, prefix) as engine:
        infos = bare_queue(prefix).list_schedules(engine)
    if as_json:
        emit_json([i.as_dict() for i in infos])
    else:
        click.echo(render_schedules(infos))


@schedules.command("run")
@queue_options
@click.argument("name")
def run(dsn: str | None, prefix: str, as_json: bool, name: str) -> None:
    """Fire schedule NAME once, now (its next fire time does not move)."""
    queue = bare_queue(prefix)
    with opened(dsn, prefix) as engine:
        job_id = queue.run_schedule_now(engine, name)
    if as_json:
        emit_json({"schedule": name, "job_id": job_id})
    else:
        click.echo(f"fired schedule {name}: job {job_id}")


def _pause(dsn: str | None, prefix: str, as_json: bool, name: str, actor: str, paused: bool) -> None:
    queue = bare_queue(prefix)
    with opened(dsn, prefix) as engine:
        if paused:
            queue.pause_schedule(engine, name, actor=actor)
        else:
            queue.resume_schedule(engine, name, actor=actor)
    verb = "paused" if paused else "resumed"
    if as_json:
        emit_json({"schedule": name, "paused": paused})
    else:
        click.echo(f"{verb} schedule {name}")


@schedules.command("pause")
@queue_options
@actor_option
@click.argument("name")
def pause(dsn: str | None, prefix: str, as_json: bool, actor: str, name: str) -> None:
    """Stop schedule NAME firing until it is resumed (--actor is logged)."""
    _pause(dsn, prefix, as_json, name, actor, True)


@schedules.command("resume")
@queue_options
@actor_option
@click.argument("name")
def resume(dsn: str | None, prefix: str, as_json: bool, actor: str, name: str) -> None:
    """Let schedule NAME fire again, from its next fire time after now (no catch-up of the pause)."""
    _pause(dsn, prefix, as_json, name, actor, False)
