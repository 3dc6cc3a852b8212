"""One job's lists, bounded: a page of its journal, parents, dependents and steps, with counts.

``queue.job_sections`` (the dashboard's job page and ``venturi jobs show``)
reads each list a page at a time, so what one job shows stays small whatever
it holds: a fan-in's 100,000 parents are counted by status and listed
``limit`` at a time, and a run of consecutive ``merged`` journal rows (a
debounce key merged 10,000 times) is one line with its count.  Each section
carries a cursor for its next page (None: it was the last).  Everything is
read in one short REPEATABLE READ transaction, so the counts and the pages
agree; nothing is written.  An archived job's journal, links and kept steps
are read from its archive row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

import sqlalchemy as sa

from venturi_sa.errors import InvalidOption
from venturi_sa.models import Models
from venturi_sa.ops.dependents import DependentInfo, ParentInfo, parent_rows
from venturi_sa.ops.history import decode_cursor, encode_cursor, job_not_found
from venturi_sa.ops.job_steps import StepInfo
from venturi_sa.ops.records import JournalInfo, jsonable
from venturi_sa.ops.transaction import short_transaction
from venturi_sa.storage import archive_reads
from venturi_sa.storage import dependent_reads as reads
from venturi_sa.storage import history as history_store
from venturi_sa.storage import journal_pages as journal_store
from venturi_sa.storage import steps as step_store
from venturi_sa.storage.dependent_reads import DependentsParams
from venturi_sa.storage.history import JobParams
from venturi_sa.storage.journal_pages import JournalPageParams, JournalSummary
from venturi_sa.storage.params import Runner

SHOWN = 20
"""Each section's default page size."""
MOST = 1000
"""The largest page size a caller may ask for."""

T = TypeVar("T")


@dataclass(frozen=True)
class JournalLine:
    """One line of a journal page: an entry, or the first of ``entries`` consecutive ``merged`` rows (which
    end at entry ``last_id``, recorded at ``last_recorded_at``)."""

    entry: JournalInfo
    entries: int
    last_id: int
    last_recorded_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {**self.entry.as_dict(), "entries": self.entries, "last_id": self.last_id,
                "last_recorded_at": self.last_recorded_at.isoformat()}


@dataclass(frozen=True)
class Section(Generic[T]):
    """A page of one list: its ``items``, how many the whole list holds (``total``; by status in ``counts``
    for parents and dependents), and the cursor of the next page (None: this is the last)."""

    items: list[T]
    total: int
    next: str | None
    counts: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        items = [_as_dict(i) for i in self.items]
        return {"items": items, "total": self.total, "counts": self.counts, "next": self.next}


def _as_dict(item: Any) -> dict[str, Any]:
    if hasattr(item, "as_dict"):
        return dict(item.as_dict())
    return {k: jsonable(v) for k, v in asdict(item).items()}


@dataclass(frozen=True, kw_only=True)
class Starts:
    """Where each section's page starts: the cursors of a previous :class:`JobSections` (None: the first)."""

    limit: int = SHOWN
    journal: str | None = None
    parents: str | None = None
    dependents: str | None = None
    steps: str | None = None


@dataclass(frozen=True)
class JobSections:
    """A page of each of a job's lists, with its newest journal outcome and note."""

    journal: Section[JournalLine]
    parents: Section[ParentInfo]
    dependents: Section[DependentInfo]
    steps: Section[StepInfo]
    last_outcome: str | None
    last_note: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"journal": self.journal.as_dict(), "parents": self.parents.as_dict(),
                "dependents": self.dependents.as_dict(), "steps": self.steps.as_dict()}


def _number(name: str, cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 18:
        raise InvalidOption(f"invalid {name} cursor {cursor[:40]!r}: pass back the one a page gave")
    return int(cursor)


def _counted(items: list[T], limit: int, first: bool,
             count: Callable[[], dict[str, int]]) -> tuple[list[T], int, dict[str, int], bool]:
    """The page (``items`` holds up to ``limit + 1``), the total, the counts by status, and whether more follow.

    A first page that is not full is the whole list: counted here, without a statement."""
    more = len(items) > limit
    if more or not first:
        counts = count()
    else:
        counts = {}
        for item in items:
            status = getattr(item, "status", None) or "deleted"
            counts[status] = counts.get(status, 0) + 1
    return items[:limit], sum(counts.values()), dict(sorted(counts.items())), more


def _parents(models: Models, runner: Runner, job_id: str, starts: Starts) -> Section[ParentInfo]:
    offset = _number("parents", starts.parents)
    rows = parent_rows(models, runner, job_id, offset, starts.limit + 1)
    items, total, counts, more = _counted(rows, starts.limit, offset == 0,
                                          lambda: reads.parent_counts(models, runner, job_id))
    return Section(items, total, str(offset + starts.limit) if more else None, counts)


def _dependents(models: Models, runner: Runner, job_id: str, starts: Starts) -> Section[DependentInfo]:
    after = decode_cursor(starts.dependents) if starts.dependents else None
    rows = reads.dependents(models, runner, DependentsParams(job_id=job_id, after=after, limit=starts.limit + 1))
    items = [DependentInfo(id=r.id, kind=r.kind, status=r.status, if_parent_dead=r.policy) for r in rows]
    page, total, counts, more = _counted(items, starts.limit, after is None,
                                         lambda: reads.dependent_counts(models, runner, job_id))
    last = rows[len(page) - 1] if more else None
    return Section(page, total, encode_cursor(last.created_at, last.id) if last is not None else None, counts)


def fold(rows: Sequence[Any], start: int, limit: int) -> list[JournalLine]:
    """Journal rows (id order) from id ``start`` on as lines, consecutive ``merged`` rows folded into one;
    at most ``limit`` lines.  What :func:`~venturi_sa.storage.journal_pages.journal_page` does in SQL, for
    an archived job's journal (read whole with its archive row)."""
    lines: list[JournalLine] = []
    for r in rows:
        if r.id < start:
            continue
        entry = JournalInfo(**r._mapping)
        if lines and entry.outcome == "merged" and lines[-1].entry.outcome == "merged":
            first = lines[-1]
            lines[-1] = JournalLine(first.entry, first.entries + 1, entry.id, entry.recorded_at)
            continue
        if len(lines) == limit:
            break
        lines.append(JournalLine(entry, 1, entry.id, entry.recorded_at))
    return lines


def _journal(models: Models, runner: Runner, job_id: str, live: bool,
             starts: Starts) -> tuple[Section[JournalLine], JournalSummary]:
    start = _number("journal", starts.journal)
    if live:
        rows = journal_store.journal_page(models, runner, JournalPageParams(job_id=job_id, start=start,
                                                                            limit=starts.limit + 1))
        lines = [JournalLine(JournalInfo(**{k: v for k, v in r._mapping.items()
                                            if k not in ("entries", "last_id", "last_recorded_at")}),
                             int(r.entries), r.last_id, r.last_recorded_at) for r in rows]
        summary = journal_store.journal_summary(models, runner, job_id)
    else:
        whole = archive_reads.fetch_journal(models, runner, job_id)
        lines = fold(whole, start, starts.limit + 1)
        noted = [r.note for r in whole if r.note is not None]
        summary = JournalSummary(len(whole), whole[-1].outcome if whole else None, noted[-1] if noted else None)
    more = len(lines) > starts.limit
    return Section(lines[:starts.limit], summary.total, str(lines[-1].entry.id) if more else None), summary


def _steps(models: Models, runner: Runner, job_id: str, live: bool, starts: Starts) -> Section[StepInfo]:
    after = decode_cursor(starts.steps) if starts.steps else None
    steps: list[StepInfo]
    if live:
        steps, total = step_store.read_page(models, runner, job_id, after, starts.limit + 1)
    else:
        kept = archive_reads.kept_rows(models, runner, job_id, models.steps_table, ("started_at", "name")) or []
        steps = [StepInfo(r.name, r.entry, r.result, r.run_no, r.started_at, r.finished_at, r.wake_at, r.resolution)
                 for r in kept if after is None or (r.started_at, r.name) > after][:starts.limit + 1]
        total = len(kept)
    last = steps[starts.limit - 1] if len(steps) > starts.limit else None
    return Section(steps[:starts.limit], total, encode_cursor(last.started_at, last.name) if last else None)


def job_sections(models: Models, engine: sa.Engine, job_id: str, starts: Starts = Starts()) -> JobSections:
    """A page of each of ``job_id``'s lists from ``starts`` (see the module); ``JobNotFound`` for no such job,
    ``InvalidOption`` for a page size outside 1..:data:`MOST` or a cursor no page gave."""
    if not 1 <= starts.limit <= MOST:
        raise InvalidOption(f"limit must be between 1 and {MOST}, got {starts.limit}")
    with short_transaction(models, engine, "REPEATABLE READ") as session:
        live = history_store.fetch_job(models, session, JobParams(job_id=job_id)) is not None
        if not live and archive_reads.archived_status(models, session, job_id) is None:
            raise job_not_found(models, job_id)
        journal, summary = _journal(models, session, job_id, live, starts)
        return JobSections(journal=journal, parents=_parents(models, session, job_id, starts),
                           dependents=_dependents(models, session, job_id, starts),
                           steps=_steps(models, session, job_id, live, starts),
                           last_outcome=summary.last_outcome, last_note=summary.last_note)
