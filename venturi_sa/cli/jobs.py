"""``venturi jobs``: list history, show one job with its journal, and admin actions.

Admin actions (retry, kill, release) are each one short transaction that
changes the job only if its status allows it, and journal the operator's note.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any

import click

from venturi_sa.cli import dependency_lines
from venturi_sa.cli.connect import bare_queue, opened
from venturi_sa.cli.main import VenturiGroup, cli
from venturi_sa.cli.options import actor_option, queue_options
from venturi_sa.cli.output import cell, emit_json, fields, table
from venturi_sa.cli.step_lines import render_steps
from venturi_sa.errors import InvalidOption
from venturi_sa.ops.job_sections import MOST, SHOWN, JournalLine, Section, Starts
from venturi_sa.ops.records import FireInfo, JobInfo, JobView, JournalInfo
from venturi_sa.states import STATUSES

LIST_COLUMNS = ("id", "kind", "status", "priority", "run_count", "failure_count", "created_at", "finished_at")
LIST_HEADERS = ("id", "kind", "status", "pri", "runs", "fails", "created", "finished")
SHOW_FIELDS = (
    ("id", "id"), ("kind", "kind"), ("status", "status"), ("priority", "priority"),
    ("created", "created_at"), ("fired by", "fired_by"), ("visible at", "visible_at"), ("finished", "finished_at"),
    ("runs", "run_count"), ("failures", "failure_count"), ("claimed by", "claimed_by"),
    ("lease expires", "claim_expires_at"), ("dedup key", "dedup_key"), ("time limit", "timeout"),
    ("payload", "payload"), ("carry", "carry"),
)
JOURNAL_COLUMNS = ("run_no", "recorded_at", "outcome", "note", "attachment")
JOURNAL_HEADERS = ("run", "recorded", "outcome", "note", "attachment")


def parse_time(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    """An ISO 8601 time; a time without an offset is taken as UTC."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 time such as 2024-05-01T12:00:00Z",
                                 ctx=ctx, param=param) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


@cli.group(cls=VenturiGroup)
def jobs() -> None:
    """Inspect jobs and their journals; retry, kill or release one job."""


@jobs.command("list")
@queue_options
@click.option("--status", type=click.Choice(STATUSES), help="Only jobs in this status.")
@click.option("--kind", help="Only jobs of this kind.")
@click.option("--finished-after", callback=parse_time, metavar="TIME",
              help="Only jobs finished at or after TIME (ISO 8601, UTC if no offset).")
@click.option("--finished-before", callback=parse_time, metavar="TIME", help="Only jobs finished before TIME.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True, help="Page size.")
@click.option("--cursor", help="Continue after the page that printed this cursor.")
def list_jobs(dsn: str | None, prefix: str, as_json: bool, status: str | None, kind: str | None,
              finished_after: datetime | None, finished_before: datetime | None, limit: int,
              cursor: str | None) -> None:
    """List jobs newest first (by creation), a page at a time."""
    queue = bare_queue(prefix)
    with opened(dsn, prefix) as engine:
        page = queue.history(engine, status=status, kind=kind, finished_after=finished_after,
                             finished_before=finished_before, limit=limit, cursor=cursor)
    if as_json:
        emit_json(page.as_dict())
        return
    if not page.items:
        click.echo("no jobs match")
    else:
        rows = [[getattr(job, c) for c in LIST_COLUMNS] for job in page.items]
        click.echo(table(LIST_HEADERS, rows, right=("pri", "runs", "fails")))
    if page.next_cursor:
        click.echo(f"\nmore: add --cursor {page.next_cursor}")


def render_fire(fire: FireInfo | None) -> str | None:
    """``schedule NAME, fire time T (fired at F)``, times in UTC; None for a job no schedule inserted."""
    if fire is None:
        return None
    return f"schedule {fire.schedule}, fire time {cell(fire.fire_at)} (fired at {cell(fire.fired_at)})"


def render_job(job: JobView, journal: Sequence[JournalInfo | JournalLine]) -> str:
    """A job's fields (with the schedule fire that inserted it and its own time limit), then its journal
    timeline, as text; a folded line of ``merged`` entries says how many it holds."""
    values = {**asdict(job), "fired_by": render_fire(job.fired_by)}
    text = fields([(label, values[key]) for label, key in SHOW_FIELDS])
    if not journal:
        return f"{text}\n\njournal: (empty)"
    rows = []
    for item in journal:
        entry, count = (item.entry, item.entries) if isinstance(item, JournalLine) else (item, 1)
        row = [getattr(entry, c) for c in JOURNAL_COLUMNS]
        if count > 1:
            row[2] = f"{entry.outcome} x{count}"
        rows.append(row)
    return f"{text}\n\njournal:\n{table(JOURNAL_HEADERS, rows, right=('run',))}"


SECTIONS = ("journal", "parents", "dependents", "steps")
"""The lists ``jobs show`` pages; ``--<name>-from CURSOR`` starts one at the cursor a page printed."""


def _from_option(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    return click.option(f"--{name}-from", f"{name}_from", metavar="CURSOR",
                        help=f"Start the {name} at this cursor (printed under a page that has more).")


def _more(name: str, section: Section[Any]) -> str:
    """A section's heading: its count (by status for parents and dependents) and how to see the next page."""
    counts = ", ".join(f"{n} {status}" for status, n in section.counts.items())
    text = f"{name}: {section.total}" + (f" ({counts})" if counts else "")
    if section.next is not None:
        text += f"; showing {len(section.items)}, more: --{name}-from {section.next}"
    return text


@jobs.command("show")
@queue_options
@click.option("--limit", type=click.IntRange(1, MOST), default=SHOWN, show_default=True,
              help="How many journal lines, parents, dependents and steps to show (each).")
@_from_option("journal")
@_from_option("parents")
@_from_option("dependents")
@_from_option("steps")
@click.argument("job_id", metavar="ID")
def show(dsn: str | None, prefix: str, as_json: bool, limit: int, journal_from: str | None,
         parents_from: str | None, dependents_from: str | None, steps_from: str | None, job_id: str) -> None:
    """Show one job (and the schedule fire that inserted it), its journal, oldest entry first, its parents and
    dependents and its steps: the first --limit of each (consecutive merged journal entries are one line),
    with counts and the option that shows the next page."""
    queue = bare_queue(prefix)
    starts = Starts(limit=limit, journal=journal_from, parents=parents_from, dependents=dependents_from,
                    steps=steps_from)
    with opened(dsn, prefix) as engine:
        job = queue.get_job(engine, job_id)
        try:
            found = queue.job_sections(engine, job_id, starts)
        except InvalidOption as exc:
            raise click.BadParameter(str(exc)) from None
    lines = found.journal.items
    if as_json:
        emit_json({"job": job.as_dict(), "journal": [line.as_dict() for line in lines],
                   "steps": [step.as_dict() for step in found.steps.items],
                   **dependency_lines.as_json(found.parents.items, found.dependents.items),
                   "pages": {name: {k: v for k, v in getattr(found, name).as_dict().items() if k != "items"}
                             for name in SECTIONS}})
        return
    entries = [line.entry for line in lines]
    text = render_job(job, lines) + render_steps(entries, found.steps.items)
    if found.journal.total:
        text += "\n" + _more("journal", found.journal)
    if found.steps.total:
        text += "\n" + _more("steps", found.steps)
    dependencies = dependency_lines.render(found.parents.items, found.dependents.items)
    for name in ("parents", "dependents"):
        section = getattr(found, name)
        if section.total:
            dependencies = dependencies.replace(f"{name}:\n", f"{_more(name, section)}\n", 1)
    click.echo("\n\n".join(filter(None, [text, dependencies])))


def _admin(action: str, dsn: str | None, prefix: str, as_json: bool, job_id: str, note: str | None,
           actor: str = "operator", **options: Any) -> None:
    queue = bare_queue(prefix)
    with opened(dsn, prefix) as engine:
        before = queue.get_job(engine, job_id).status
        act: Callable[..., JobInfo] = getattr(queue, action)
        job = act(engine, job_id, note=note, actor=actor, **options)
    if as_json:
        emit_json(job.as_dict())
    else:
        click.echo(f"job {job_id} ({job.kind}): {before} -> {job.status}")


note_option = click.option("--note", "-m", help="Why (recorded in the job's journal).")


@jobs.command("retry")
@queue_options
@note_option
@actor_option
@click.option("--with-dependents", is_flag=True,
              help="Also requeue the dependents its death killed (and theirs), to wait for it again.")
@click.argument("job_id", metavar="ID")
def retry(dsn: str | None, prefix: str, as_json: bool, note: str | None, actor: str, with_dependents: bool,
          job_id: str) -> None:
    """Requeue a dead job: back to pending, eligible now, failure count reset (with --with-dependents, the
    dependents its death killed too, in the same transaction)."""
    _admin("requeue", dsn, prefix, as_json, job_id, note, actor, with_dependents=with_dependents)


@jobs.command("kill")
@queue_options
@note_option
@actor_option
@click.argument("job_id", metavar="ID")
def kill(dsn: str | None, prefix: str, as_json: bool, note: str | None, actor: str, job_id: str) -> None:
    """Mark a pending job dead so no worker runs it."""
    _admin("kill", dsn, prefix, as_json, job_id, note, actor)


@jobs.command("release")
@queue_options
@note_option
@actor_option
@click.argument("job_id", metavar="ID")
def release(dsn: str | None, prefix: str, as_json: bool, note: str | None, actor: str, job_id: str) -> None:
    """Put a job stuck in claimed (its worker is known to be gone) back to pending now.

    Only for a worker you know is dead: if it is alive, its outcome write
    will be refused (fenced) and its work rolled back.
    """
    _admin("release", dsn, prefix, as_json, job_id, note, actor)
