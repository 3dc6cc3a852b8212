"""Runtime control on the command line: ``jobs cancel``, ``jobs why``, ``jobs edit``, ``jobs retry-now``,
``pause``, ``resume`` and ``pauses``.

Each action is journaled with ``--actor`` (default ``$VENTURI_ACTOR``, else
``user@host``) and ``--note``/``--reason``; see ``docs/operations.md``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import click

from venturi_sa.cli.connect import bare_queue, opened
from venturi_sa.cli.durations import Duration
from venturi_sa.cli.failures import CliError
from venturi_sa.cli.jobs import jobs, note_option, parse_time
from venturi_sa.cli.main import cli
from venturi_sa.cli.options import actor_option, queue_options
from venturi_sa.cli.output import emit_json, table
from venturi_sa.errors import InvalidTransition
from venturi_sa.ops.control import Cancelled, PauseInfo


@jobs.command("cancel")
@queue_options
@note_option
@actor_option
@click.option("--kind", help="Cancel every pending or claimed job of this kind (instead of IDs).")
@click.argument("job_ids", metavar="ID...", nargs=-1)
def cancel(dsn: str | None, prefix: str, as_json: bool, note: str | None, actor: str, kind: str | None,
           job_ids: tuple[str, ...]) -> None:
    """Cancel jobs: a pending one ends dead now; a running one is asked to stop (its worker ends it dead).

    Each ID is its own transaction; one that cannot be cancelled (finished
    already, unknown) is reported and the others still are.
    """
    if bool(job_ids) == bool(kind):
        raise click.UsageError("give job IDs or --kind, not both or neither")
    queue = bare_queue(prefix)
    done: list[Cancelled] = []
    problems: list[str] = []
    with opened(dsn, prefix) as engine:
        if kind is not None:
            done = queue.cancel_kind(engine, kind, note, actor=actor)
        for job_id in job_ids:
            try:
                done.append(queue.cancel(engine, job_id, note, actor=actor))
            except (InvalidTransition, LookupError) as exc:
                problems.append(str(exc))
    if as_json:
        emit_json({"cancelled": [c.as_dict() for c in done], "errors": problems})
    else:
        for c in done:
            verb = "cancelled (dead)" if c.result == "cancelled" else "cancel requested (running)"
            click.echo(f"job {c.job_id} ({c.kind}): {verb}")
        if not done and not problems:
            click.echo("no job to cancel")
    if problems:
        raise CliError("; ".join(problems))


@jobs.command("why")
@queue_options
@click.argument("job_id", metavar="ID")
def why(dsn: str | None, prefix: str, as_json: bool, job_id: str) -> None:
    """Say why a job is not running: scheduled, in backoff, paused, behind others, no worker, claimed, dead."""
    queue = bare_queue(prefix)
    with opened(dsn, prefix) as engine:
        explanation = queue.explain(engine, job_id)
    if as_json:
        emit_json(explanation.as_dict())
    else:
        click.echo(str(explanation))


@jobs.command("edit")
@queue_options
@note_option
@actor_option
@click.option("--priority", type=click.IntRange(0, 2), help="New priority (0 high, 1 normal, 2 low).")
@click.option("--run-at", callback=parse_time, metavar="TIME", help="Run at TIME (ISO 8601, UTC if no offset).")
@click.option("--delay", type=Duration(), metavar="DURATION", help="Run after DURATION from now (e.g. 30m).")
@click.option("--now", "run_now", is_flag=True, help="Make it eligible now.")
@click.argument("job_id", metavar="ID")
def edit(dsn: str | None, prefix: str, as_json: bool, note: str | None, actor: str, priority: int | None,
         run_at: datetime | None, delay: timedelta | None, run_now: bool, job_id: str) -> None:
    """Change a pending job's priority or when it runs (journaled); claimed and finished jobs are refused.

    Payload edits need the task's schema: use ``queue.edit(engine, id, payload=...)`` in the application.
    """
    queue = bare_queue(prefix)
    with opened(dsn, prefix) as engine:
        job = queue.edit(engine, job_id, priority=priority, run_at=run_at, delay=delay, run_now=run_now,
                         note=note, actor=actor)
    if as_json:
        emit_json(job.as_dict())
    else:
        click.echo(f"job {job.id} ({job.kind}): priority {job.priority}, visible at {job.visible_at.isoformat()}")


@jobs.command("retry-now")
@queue_options
@note_option
@actor_option
@click.argument("job_id", metavar="ID")
def retry_now(dsn: str | None, prefix: str, as_json: bool, note: str | None, actor: str, job_id: str) -> None:
    """Make a pending job in backoff (or scheduled for later) eligible now."""
    queue = bare_queue(prefix)
    with opened(dsn, prefix) as engine:
        job = queue.retry_now(engine, job_id, note, actor=actor)
    if as_json:
        emit_json(job.as_dict())
    else:
        click.echo(f"job {job.id} ({job.kind}): eligible now")


def _pause_line(p: PauseInfo) -> str:
    until = f" until {p.resume_at.isoformat()}" if p.resume_at else " until resumed"
    return f"{p.kind}: paused by {p.actor} at {p.paused_at.isoformat()}{until} ({p.reason or 'no reason'})"


@cli.command("pause")
@queue_options
@actor_option
@click.option("--reason", "-m", required=True, help="Why (recorded with the pause).")
@click.option("--until", callback=parse_time, metavar="TIME", help="Resume by itself at TIME (ISO 8601).")
@click.option("--for", "delay", type=Duration(), metavar="DURATION", help="Resume by itself after DURATION.")
@click.argument("kind", metavar="KIND")
def pause(dsn: str | None, prefix: str, as_json: bool, actor: str, reason: str, until: datetime | None,
          delay: timedelta | None, kind: str) -> None:
    """Stop every worker from claiming jobs of KIND; running jobs finish.

    KIND may be a pattern: "reports.*" pauses every kind starting with
    "reports.", "*" every kind (quote it for the shell).  Persisted: it holds
    across worker restarts until `venturi resume KIND` or --until/--for.
    """
    queue = bare_queue(prefix)
    with opened(dsn, prefix) as engine:
        info = queue.pause(engine, kind, reason=reason, until=until, delay=delay, actor=actor)
    if as_json:
        emit_json(info.as_dict())
    else:
        click.echo(_pause_line(info))


@cli.command("resume")
@queue_options
@actor_option
@click.argument("kind", metavar="KIND")
def resume(dsn: str | None, prefix: str, as_json: bool, actor: str, kind: str) -> None:
    """End KIND's pause now (a pattern's pause: give the same pattern); idle workers are woken."""
    queue = bare_queue(prefix)
    with opened(dsn, prefix) as engine:
        info = queue.resume(engine, kind, actor=actor)
    if as_json:
        emit_json(info.as_dict())
    else:
        click.echo(f"{kind}: resumed by {actor} (was paused by {info.actor}: {info.reason or 'no reason'})")


@cli.command("pauses")
@queue_options
@click.option("--all", "show_all", is_flag=True, help="The recent record, ended pauses included.")
def pauses(dsn: str | None, prefix: str, as_json: bool, show_all: bool) -> None:
    """List the pauses in force (who, why, until when)."""
    queue = bare_queue(prefix)
    with opened(dsn, prefix) as engine:
        found = queue.pauses(engine, in_force_only=not show_all)
    if as_json:
        emit_json([p.as_dict() for p in found])
    elif not found:
        click.echo("no kind is paused")
    else:
        rows = [[p.kind, p.actor, p.paused_at, p.resume_at or "-", p.resumed_at or "-", p.reason or ""]
                for p in found]
        click.echo(table(("kind", "by", "since", "until", "resumed", "reason"), rows))

