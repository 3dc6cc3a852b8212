"""Runtime control on the command line: ``jobs cancel``, ``jobs why``, ``jobs edit``, ``jobs retry-now``,
``pause``, ``resume`` and ``pauses``.

Each action is journaled with ``--actor`` (default ``$VENTURI_ACTOR``, else
``user@host``) and ``--note``/``--reason``; see ``docs/operations.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

import click
import sqlalchemy as sa

from venturi_sa.cli.connect import app_queue, bare_queue, opened
from venturi_sa.cli.durations import Duration
from venturi_sa.cli.failures import CliError
from venturi_sa.cli.jobs import jobs, note_option, parse_time
from venturi_sa.cli.main import cli
from venturi_sa.cli.options import actor_option, queue_options
from venturi_sa.cli.output import emit_json, table
from venturi_sa.errors import InvalidTransition
from venturi_sa.ops.cancel import Cancelled
from venturi_sa.ops.pause import PauseInfo
from venturi_sa.queue import Queue


class Printable(Protocol):
    def as_dict(self) -> Any: ...


R = TypeVar("R", bound=Printable)


def act(dsn: str | None, prefix: str, as_json: bool, action: Callable[[Queue, sa.Engine], R],
        text: Callable[[R], str], queue: Queue | None = None) -> R:
    """Run ``action`` on the queue's engine, then print its result: ``as_dict()`` as JSON, or ``text(result)``
    (nothing if that is empty).  ``queue`` defaults to one with no task types."""
    queue = queue if queue is not None else bare_queue(prefix)
    with opened(dsn, prefix) as engine:
        result = action(queue, engine)
    if as_json:
        emit_json(result.as_dict())
    elif shown := text(result):
        click.echo(shown)
    return result


@dataclass
class CancelReport:
    """What ``jobs cancel`` did: the jobs cancelled (or asked to stop) and one error per ID that could not be."""

    done: list[Cancelled] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"cancelled": [c.as_dict() for c in self.done], "errors": self.problems}

    def text(self) -> str:
        verbs = {"cancelled": "cancelled (dead)", "ended": "already {}; its dependents not yet ended were cancelled"}
        lines = [f"job {c.job_id} ({c.kind}): {verbs.get(c.result, 'cancel requested (running)').format(c.status)}"
                 for c in self.done]
        return "\n".join(lines) if lines or self.problems else "no job to cancel"


@jobs.command("cancel")
@queue_options
@note_option
@actor_option
@click.option("--kind", help="Cancel every pending or claimed job of this kind (instead of IDs).")
@click.option("--with-dependents", is_flag=True,
              help="Also cancel every job waiting for the IDs (after=), transitively, whatever its policy.")
@click.argument("job_ids", metavar="ID...", nargs=-1)
def cancel(dsn: str | None, prefix: str, as_json: bool, note: str | None, actor: str, kind: str | None,
           with_dependents: bool, job_ids: tuple[str, ...]) -> None:
    """Cancel jobs: a pending one ends dead now; a running one is asked to stop (its worker ends it dead).

    Each ID is its own transaction; one that cannot be cancelled (finished
    already, unknown) is reported and the others still are.
    """
    if bool(job_ids) == bool(kind):
        raise click.UsageError("give job IDs or --kind, not both or neither")

    def cancel_all(queue: Queue, engine: sa.Engine) -> CancelReport:
        report = CancelReport(done=queue.cancel_kind(engine, kind, note, actor=actor) if kind is not None else [])
        for job_id in job_ids:
            try:
                report.done.append(queue.cancel(engine, job_id, note, actor=actor, with_dependents=with_dependents))
            except (InvalidTransition, LookupError) as exc:
                report.problems.append(str(exc))
        return report

    report = act(dsn, prefix, as_json, cancel_all, CancelReport.text)
    if report.problems:
        raise CliError("; ".join(report.problems))


@jobs.command("why")
@queue_options
@click.argument("job_id", metavar="ID")
def why(dsn: str | None, prefix: str, as_json: bool, job_id: str) -> None:
    """Say why a job is not running: limited, waiting on parents, sleeping, waiting for a signal, paused,
    scheduled, in backoff, behind others, no worker, claimed, dead.

    With --app (and under ``flask venturi``) the app's queue explains, so the limits its tasks declare are
    checked; without it only overridden limits are, and a job otherwise due says its declared limits are
    unknown.
    """
    act(dsn, prefix, as_json, lambda queue, engine: queue.explain(engine, job_id), str, app_queue(prefix))


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
    act(dsn, prefix, as_json, lambda queue, engine: queue.edit(
        engine, job_id, priority=priority, run_at=run_at, delay=delay, run_now=run_now, note=note, actor=actor),
        lambda job: f"job {job.id} ({job.kind}): priority {job.priority}, visible at {job.visible_at.isoformat()}")


@jobs.command("retry-now")
@queue_options
@note_option
@actor_option
@click.argument("job_id", metavar="ID")
def retry_now(dsn: str | None, prefix: str, as_json: bool, note: str | None, actor: str, job_id: str) -> None:
    """Make a pending job in backoff (or scheduled for later) eligible now."""
    act(dsn, prefix, as_json, lambda queue, engine: queue.retry_now(engine, job_id, note, actor=actor),
        lambda job: f"job {job.id} ({job.kind}): eligible now")


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
    act(dsn, prefix, as_json, lambda queue, engine: queue.pause(
        engine, kind, reason=reason, until=until, delay=delay, actor=actor), _pause_line)


@cli.command("resume")
@queue_options
@actor_option
@click.argument("kind", metavar="KIND")
def resume(dsn: str | None, prefix: str, as_json: bool, actor: str, kind: str) -> None:
    """End KIND's pause now (a pattern's pause: give the same pattern); idle workers are woken."""
    act(dsn, prefix, as_json, lambda queue, engine: queue.resume(engine, kind, actor=actor),
        lambda info: f"{kind}: resumed by {actor} (was paused by {info.actor}: {info.reason or 'no reason'})")


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

