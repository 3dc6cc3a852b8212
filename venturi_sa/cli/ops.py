"""``venturi stats``, ``venturi cleanup`` and ``venturi archive``: the queue at a glance, retention, archiving."""

from __future__ import annotations

import sys
from datetime import timedelta

import click

from venturi_sa.cli.connect import app_queue, bare_queue, opened
from venturi_sa.cli.durations import Duration, format_duration
from venturi_sa.cli.main import cli
from venturi_sa.cli.options import queue_options
from venturi_sa.cli.output import emit_json, table
from venturi_sa.cli.schedules import render_schedules
from venturi_sa.ops.archive import DEFAULT_ARCHIVE_AFTER
from venturi_sa.ops.records import Stats
from venturi_sa.states import TERMINAL

COUNT_COLUMNS = ("eligible", "scheduled", "backoff", "sleeping", "waiting_for_signal", "waiting", "claimed",
                 "completed", "dead", "total")
"""The by-kind columns; every job is in exactly one before ``total``, so they sum to it."""
HEADINGS = {"waiting_for_signal": "signal", "waiting": "parents"}
SUMMARY = (("eligible now", "eligible"), ("scheduled", "scheduled"), ("backoff", "backoff"),
           ("sleeping", "sleeping"), ("waiting for a signal", "waiting_for_signal"),
           ("waiting for parents", "waiting"), ("in flight", "in_flight"), ("expired leases", "expired_leases"),
           ("dead", "dead"))


def render_stats(stats: Stats) -> str:
    """Counts by kind (pending split by why it waits; a paused kind marked), a summary, the oldest wait, the
    schedules."""
    rows: list[list[object]] = [[f"{kind} (paused)" if kind in stats.paused_kinds else kind,
                                 *(counts.get(c, 0) for c in COUNT_COLUMNS)]
                                for kind, counts in stats.by_kind.items()]
    if rows:
        totals = [sum(counts.get(c, 0) for counts in stats.by_kind.values()) for c in COUNT_COLUMNS]
        headings = [HEADINGS.get(c, c) for c in COUNT_COLUMNS]
        lines = [table(("kind", *headings), [*rows, ["(all)", *totals]], right=headings)]
    else:
        lines = ["no jobs"]
    summary = "   ".join(f"{label}: {getattr(stats, key)}" for label, key in SUMMARY)
    age = stats.oldest_eligible_age
    waited = format_duration(age) if age is not None else "-"
    text = [*lines, "", summary, f"oldest eligible job waiting: {waited}"]
    if stats.schedules:
        text += ["", render_schedules(stats.schedules)]
    return "\n".join(text)


@cli.command()
@queue_options
def stats(dsn: str | None, prefix: str, as_json: bool) -> None:
    """Show job counts by kind and state (each job in one column; a paused kind marked), and how far behind
    the queue is."""
    queue = app_queue(prefix)
    with opened(dsn, prefix) as engine:
        result = queue.stats(engine)
        paused = queue.pauses(engine)
    if as_json:
        emit_json({**result.as_dict(), "paused": [p.as_dict() for p in paused]})
    else:
        click.echo(render_stats(result))
        for p in paused:
            until = p.resume_at.isoformat() if p.resume_at else "resumed"
            click.echo(f"paused: {p.kind} by {p.actor} until {until} ({p.reason or 'no reason'})")


class Progress:
    """Prints a cleanup's running total on stderr (overwriting one line on a terminal)."""

    def __init__(self, verb: str) -> None:
        self.verb = verb
        self.tty = sys.stderr.isatty()
        self.shown = False

    def __call__(self, done: int) -> None:
        end = "\r" if self.tty else "\n"
        click.echo(f"{self.verb} {done} jobs so far...", err=True, nl=False)
        click.echo(end, err=True, nl=False)
        self.shown = True

    def close(self) -> None:
        if self.shown and self.tty:
            click.echo("", err=True)


@cli.command()
@queue_options
@click.option("--older-than", type=Duration(), required=True, metavar="DURATION",
              help="Delete jobs finished longer ago than this: 7d, 12h, 30m, 90s, 1h30m.")
@click.option("--status", type=click.Choice(TERMINAL), help="Only completed or only dead jobs (default: both).")
@click.option("--kind", help="Only jobs of this kind.")
@click.option("--batch-size", type=click.IntRange(1, 100_000), default=1000, show_default=True,
              help="Rows deleted per transaction.")
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
def cleanup(dsn: str | None, prefix: str, as_json: bool, older_than: timedelta, status: str | None,
            kind: str | None, batch_size: int, dry_run: bool) -> None:
    """Delete finished (completed/dead) jobs, with their journals, older than DURATION.

    Pending and claimed jobs are never touched.  Deletes in batches, each its
    own short transaction, so it can run on a live queue; interrupting it
    keeps what was already deleted.
    """
    queue = bare_queue(prefix)
    progress = Progress("deleted")
    with opened(dsn, prefix, bound=False) as engine:
        try:
            count = queue.cleanup(engine, older_than=older_than, status=status, kind=kind,
                                  batch_size=batch_size, dry_run=dry_run, progress=None if dry_run else progress)
        finally:
            progress.close()
    if as_json:
        emit_json({"deleted": 0 if dry_run else count, "matched": count, "dry_run": dry_run,
                   "older_than_seconds": older_than.total_seconds(), "status": status, "kind": kind})
    elif dry_run:
        click.echo(f"dry run: {count} jobs finished more than {format_duration(older_than)} ago would be deleted")
    else:
        click.echo(f"deleted {count} jobs finished more than {format_duration(older_than)} ago")


@cli.command()
@queue_options
@click.option("--older-than", type=Duration(), default=format_duration(DEFAULT_ARCHIVE_AFTER), show_default=True,
              metavar="DURATION", help="Move jobs finished longer ago than this: 7d, 12h, 30m, 90s, 1h30m, 0s.")
@click.option("--batch-size", type=click.IntRange(1, 100_000), default=1000, show_default=True,
              help="Jobs moved per transaction.")
def archive(dsn: str | None, prefix: str, as_json: bool, older_than: timedelta, batch_size: int) -> None:
    """Move finished (completed/dead) jobs, with their journals, to the archive now.

    Workers do this on their own every few seconds (``Queue(archive_after=)``);
    this is the same move, for a queue whose workers do not archive or to
    catch up at once.  Moves in batches, each its own short transaction, so
    it can run on a live queue; interrupting it keeps what was already moved.
    """
    queue = bare_queue(prefix)
    with opened(dsn, prefix, bound=False) as engine:
        moved = queue.archive(engine, older_than=older_than, batch_size=batch_size)
    if as_json:
        emit_json({"archived": moved, "older_than_seconds": older_than.total_seconds()})
    else:
        click.echo(f"archived {moved} jobs finished more than {format_duration(older_than)} ago")
