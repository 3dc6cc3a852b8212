"""What each page reads, through the storage seam, each in one short read-only transaction.

Nothing here locks or writes; every function returns plain records built
from rows already read.  The statements are in :mod:`venturi_sa.storage.dashboard`
(and the history/stats ones the operations API uses), each served by a seed index.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from venturi_sa.errors import JobNotFound
from venturi_sa.models import Models
from venturi_sa.ops.explain import Reason
from venturi_sa.ops.face import Operations
from venturi_sa.ops.job_sections import JobSections, Starts
from venturi_sa.ops.limits import LimitInfo
from venturi_sa.ops.pause import PauseInfo
from venturi_sa.ops.records import JobInfo, JobView, JournalInfo, ScheduleInfo, job_view_info
from venturi_sa.ops.stats import paused_by
from venturi_sa.ops.transaction import short_transaction
from venturi_sa.storage import archive_dashboard
from venturi_sa.storage import dashboard as dashboard_store
from venturi_sa.storage import pauses as pauses_store
from venturi_sa.storage import stats as stats_store
from venturi_sa.storage.dashboard import (
    DEAD_COUNT_CAP,
    FAILED_OUTCOMES,
    JobFilter,
    JobPageParams,
    OverviewCounts,
    SelectionParams,
    WindowParams,
)
from venturi_sa.task import Registry

SECTION_STARTS = Starts(limit=50)
"""A job page's lists: the first 50 of each (journal lines, parents, dependents, steps)."""
WINDOWS = {"hour": (timedelta(hours=1), 60), "day": (timedelta(days=1), 15 * 60)}
"""Chart windows: how far back, and the bucket size in seconds."""


@dataclass(frozen=True, kw_only=True)
class Series:
    """One chart: bucket start times and, per named series, a value per bucket."""

    starts: list[datetime]
    values: dict[str, list[float]]
    bucket_seconds: int


KIND_COLUMNS = ("eligible", "scheduled", "backoff", "sleeping", "waiting_for_signal", "waiting", "claimed",
                "expired_leases", "dead", "completed_recently", "dead_recently")
"""Per-kind counts on the overview (a pending job in one of ``eligible`` to ``waiting``, as ``queue.stats``
splits them); ``*_recently``: finished within the chart window."""


@dataclass(frozen=True, kw_only=True)
class Counts:
    """The overview's numbers: live rows exactly, dead jobs up to a cap per kind, finished ones in the window.

    A total of every retained ``completed`` row would mean counting the whole
    history on a page that refreshes live; ``venturi stats`` gives it on demand.
    """

    as_of: datetime
    by_kind: dict[str, dict[str, int]]
    oldest_eligible_age_by_kind: dict[str, timedelta]
    dead_capped: frozenset[str] = frozenset()
    """Kinds with at least :data:`~venturi_sa.storage.dashboard.DEAD_COUNT_CAP` dead jobs (counted that far)."""
    paused: frozenset[str] = frozenset()
    """Kinds a pause in force holds (by name, pattern or the whole queue's)."""

    def total(self, key: str) -> int:
        return sum(k[key] for k in self.by_kind.values())

    def dead(self, kind: str | None = None) -> str:
        """The dead count of ``kind`` (None: all kinds), with "+" where the count stopped at its cap."""
        n = self.total("dead") if kind is None else self.by_kind[kind]["dead"]
        more = bool(self.dead_capped) if kind is None else kind in self.dead_capped
        return f"{n}+" if more else str(n)

    @property
    def oldest_eligible_age(self) -> timedelta | None:
        return max(self.oldest_eligible_age_by_kind.values(), default=None)


def _counts(raw: OverviewCounts, not_due: list[tuple[str, str, int]], pauses: list[str]) -> Counts:
    by_kind: dict[str, dict[str, int]] = {}

    def row(kind: str) -> dict[str, int]:
        return by_kind.setdefault(kind, dict.fromkeys(KIND_COLUMNS, 0))

    for p in raw.pending:
        row(p.kind).update(eligible=p.eligible)
    for kind, state, n in not_due:  # scheduled, backoff, sleeping, waiting for a signal or on parents
        row(kind)[state] += n
    for key, pairs in (("expired_leases", raw.expired), ("claimed", raw.claimed), ("dead", raw.dead)):
        for kind, n in pairs:
            row(kind)[key] = n
    for kind, status, n in raw.finished:
        row(kind)[f"{status}_recently"] += n
    ages = {p.kind: p.oldest_eligible_age for p in raw.pending if p.oldest_eligible_age is not None}
    capped = frozenset(kind for kind, n in raw.dead if n >= DEAD_COUNT_CAP)
    return Counts(as_of=raw.as_of, by_kind=dict(sorted(by_kind.items())), oldest_eligible_age_by_kind=ages,
                  dead_capped=capped, paused=frozenset(k for k in by_kind if paused_by(k, pauses)))


@dataclass(frozen=True, kw_only=True)
class Overview:
    counts: Counts
    throughput: Series
    latency: Series
    window: str


def _buckets(now: datetime, span: timedelta, seconds: int) -> list[datetime]:
    """The bucket starts covering ``[now - span, now]``, aligned to the epoch like the SQL."""
    first = int((now - span).timestamp()) // seconds * seconds
    last = int(now.timestamp()) // seconds * seconds
    return [datetime.fromtimestamp(t, tz=now.tzinfo) for t in range(first, last + 1, seconds)]


def _series(starts: list[datetime], names: tuple[str, ...], seconds: int,
            points: dict[tuple[int, str], float]) -> Series:
    keys = [int(s.timestamp()) for s in starts]
    return Series(starts=starts, bucket_seconds=seconds,
                  values={n: [points.get((k, n), 0.0) for k in keys] for n in names})


def overview(models: Models, engine: sa.Engine, window: str) -> Overview:
    """Counts, throughput (journal) and latency (finished jobs) over ``window`` ("hour" or "day").

    All of it is read in one REPEATABLE READ snapshot, at one ``now()``.
    """
    span, seconds = WINDOWS[window]
    params = WindowParams(span=span, bucket_seconds=seconds)
    with short_transaction(models, engine, "REPEATABLE READ") as session:
        counts = _counts(archive_dashboard.add_archive_counts(
            models, session, dashboard_store.fetch_overview_counts(models, session, params), params),
            stats_store.not_due_counts(models, session), [p.kind for p in pauses_store.pauses(models, session)])
        activity = archive_dashboard.add_activity(dashboard_store.fetch_activity(models, session, params),
                                         archive_dashboard.activity(models, session, params))
        latency = archive_dashboard.fetch_latency(models, session, params)  # the live table and the archive together
    starts = _buckets(counts.as_of, span, seconds)
    done: dict[tuple[int, str], float] = {}
    for bucket, outcome, n in map(tuple, activity):
        name = "completed" if outcome == "completed" else "failed" if outcome in FAILED_OUTCOMES else None
        if name is not None:
            key = (int(bucket.timestamp()), name)
            done[key] = done.get(key, 0.0) + n
    waits: dict[tuple[int, str], float] = {}
    for bucket, p50, p95, _ in map(tuple, latency):
        waits[(int(bucket.timestamp()), "p50")] = float(p50)
        waits[(int(bucket.timestamp()), "p95")] = float(p95)
    return Overview(counts=counts, window=window,
                    throughput=_series(starts, ("completed", "failed"), seconds, done),
                    latency=_series(starts, ("p50", "p95"), seconds, waits))


@dataclass(frozen=True, kw_only=True)
class Jobs:
    items: list[JobInfo]
    next_after: tuple[datetime, str] | None
    scanned_to: datetime | None = None
    errors: dict[str, str] = field(default_factory=dict)
    """Each listed job's last failure (outcome and journal note), for the jobs that have one."""


def jobs(models: Models, engine: sa.Engine, params: JobPageParams) -> Jobs:
    """One page of the jobs list (see :func:`venturi_sa.storage.dashboard.fetch_job_page`)."""
    with short_transaction(models, engine, "REPEATABLE READ") as session:  # one snapshot for both tables
        page = archive_dashboard.fetch_job_page_both(models, session, params)
    return Jobs(items=[JobInfo(**r._mapping) for r in page.rows], next_after=page.next_after,
                scanned_to=page.scanned_to,
                errors={r[0]: f"{r[1]}: {r[2]}" if r[2] else str(r[1]) for r in page.errors})


def matching_ids(models: Models, engine: sa.Engine, flt: JobFilter, statuses: tuple[str, ...],
                 batch: int, most: int) -> Iterator[list[str]]:
    """Batches of the ids matching ``flt`` whose status is one of ``statuses``, newest first.

    Walks the whole filter page by page (each page its own transaction), so a
    bulk action covers "all matching"; stops after ``most`` ids.  A filter
    status outside ``statuses`` leaves nothing to match.
    """
    wanted = tuple(s for s in (flt.statuses or statuses) if s in statuses)
    if not wanted:
        return
    params = JobPageParams(filter=replace(flt, statuses=wanted), limit=batch)
    given = 0
    while given < most:
        page = jobs(models, engine, params)
        ids = [j.id for j in page.items][:most - given]
        if ids:
            given += len(ids)
            yield ids
        if page.next_after is None:
            return
        params = replace(params, after=page.next_after)


def selection(models: Models, engine: sa.Engine, job_ids: list[str]) -> dict[str, tuple[str, str]]:
    """``{id: (kind, status)}`` of the ids that exist, in one short transaction (ids not found are absent)."""
    with short_transaction(models, engine) as session:
        found = dashboard_store.fetch_selection(models, session, SelectionParams(job_ids=job_ids))
        return {**archive_dashboard.fetch_selection(models, session, [i for i in job_ids if i not in found]), **found}


@dataclass(frozen=True, kw_only=True)
class Run:
    """One journal line (an entry, or a folded run of ``merged`` entries) with the time since the previous."""

    entry: JournalInfo
    since_previous: timedelta | None
    entries: int = 1
    last_recorded_at: datetime | None = None


WAITS = {"paused": "paused by its handler", "retried": "backing off after a failure", "released": "released"}


@dataclass(frozen=True, kw_only=True)
class Detail:
    job: JobView
    """The job with the schedule fire that inserted it and its own time limit (one statement)."""
    sections: JobSections
    """A page of its journal, parents, dependents and steps, with counts (:mod:`venturi_sa.ops.job_sections`)."""
    now: datetime
    on_parents: bool = False
    """Waits for unfinished parents (its dependency count, not its ``'infinity'`` ``visible_at``)."""
    reason: str = ""
    why: tuple[Reason, ...] = ()
    """For a pending or claimed job, the reasons (codes and sentences) ``queue.explain`` gives."""
    first_journal_page: bool = True
    """Whether the journal page starts at the first entry (its first line's time counts from creation)."""

    @property
    def runs(self) -> list[Run]:
        """The journal page's lines, each with the time since the line before (the first: since creation,
        on the first page)."""
        runs: list[Run] = []
        previous = self.job.created_at if self.sections.journal.items and self.first_journal_page else None
        for line in self.sections.journal.items:
            since = line.entry.recorded_at - previous if previous is not None else None
            runs.append(Run(entry=line.entry, since_previous=since, entries=line.entries,
                            last_recorded_at=line.last_recorded_at))
            previous = line.last_recorded_at
        return runs

    @property
    def waiting_for(self) -> str | None:
        """Why a pending job is not eligible yet: its last outcome (``retried``, ...) or ``scheduled``.

        None when the job is not pending or already eligible.
        """
        if self.job.status != "pending" or self.job.visible_at <= self.now:
            return None
        last = self.sections.last_outcome
        return last if last in WAITS else "scheduled"


def _reason(detail: Detail) -> str:
    """Why the job is (not) running, from its row and journal alone."""
    job, now = detail.job, detail.now
    if job.status == "pending":
        waiting = detail.waiting_for
        if waiting is not None and detail.on_parents:
            return "waiting for its parents (listed below) to end"
        if waiting is not None and job.visible_at.year >= 9999:  # 'infinity' without parents: a signal wait
            return "waiting for a signal, with no timeout (paused by its handler)"
        if waiting is not None:
            why = WAITS.get(waiting, "scheduled")
            return f"not eligible until {job.visible_at:%Y-%m-%d %H:%M:%S %Z} ({why})"
        return f"eligible since {job.visible_at:%Y-%m-%d %H:%M:%S %Z}: waiting for a worker of kind {job.kind!r}"
    if job.status == "claimed":
        if job.claim_expires_at is not None and job.claim_expires_at < now:
            return (f"claimed by {job.claimed_by}, but its lease expired at "
                    f"{job.claim_expires_at:%H:%M:%S}: waiting for lease recovery")
        return f"running on {job.claimed_by} (run {job.run_count})"
    if job.status == "dead":
        last_note = detail.sections.last_note
        return f"dead: {last_note}" if last_note else "dead"
    return "completed"


def detail(models: Models, engine: sa.Engine, job_id: str, starts: Starts = SECTION_STARTS) -> Detail | None:
    """The job's view (row, fire, own time limit; one transaction), then a page of each of its lists from
    ``starts`` (a second one), or None if there is no such job."""
    with short_transaction(models, engine) as session:
        found = dashboard_store.fetch_job_detail(models, session, job_id)
        if found.row is None:
            found = archive_dashboard.fetch_job_detail(models, session, job_id)
    if found.row is None or found.now is None:
        return None
    try:
        sections = Operations(models).job_sections(engine, job_id, starts)
    except JobNotFound:  # deleted meanwhile
        return None
    found_detail = Detail(job=job_view_info(found.row), sections=sections, now=found.now,
                          on_parents=found.on_parents, first_journal_page=starts.journal is None)
    return replace(found_detail, reason=_reason(found_detail))


def detail_page(models: Models, engine: sa.Engine, job_id: str, starts: Starts = SECTION_STARTS,
                registry: Registry | None = None) -> Detail | None:
    """:func:`detail` and why the job waits, as ``queue.explain`` with ``registry`` (the dashboard's tasks) says.

    Three short transactions; the explanation (limits, parents, sleeps and
    waits, pauses, backoff, place in line, whether a worker runs the kind)
    only for a pending or claimed job.  A pending job's headline is the first
    reason's sentence, so the page, ``venturi jobs why`` and ``queue.explain``
    say the same.
    """
    found = detail(models, engine, job_id, starts)
    if found is None:
        return None
    if found.job.status not in ("pending", "claimed"):
        return found
    try:
        why = tuple(Operations(models, registry).explain(engine, job_id).reasons)
    except JobNotFound:  # deleted meanwhile: show what was read
        return found
    headline = why[0].text if why and found.job.status == "pending" and why[0].code != "claimed" else found.reason
    return replace(found, why=why, reason=headline)


@dataclass(frozen=True, kw_only=True)
class Worker:
    name: str
    claimed: int
    expired: int
    kinds: list[str]
    soonest: datetime | None
    latest: datetime | None


@dataclass(frozen=True, kw_only=True)
class Workers:
    workers: list[Worker]
    claimed: list[dict[str, Any]] = field(default_factory=list)


def workers(models: Models, engine: sa.Engine) -> Workers:
    """Who holds claims now, and the claimed jobs (soonest lease end first, bounded)."""
    with short_transaction(models, engine) as session:
        grouped, claimed = dashboard_store.fetch_workers(models, session)
    return Workers(
        workers=[Worker(name=r[0] or "?", claimed=int(r[1]), expired=int(r[2]), kinds=sorted(r[3] or []),
                        soonest=r[4], latest=r[5]) for r in map(tuple, grouped)],
        claimed=[{"id": r[0], "kind": r[1], "claimed_by": r[2], "claim_expires_at": r[3],
                  "run_count": r[4], "expired": bool(r[5])} for r in map(tuple, claimed)])


@dataclass
class Control:
    """The schedules page: every stored schedule and the pauses in force."""

    schedules: list[ScheduleInfo]
    pauses: list[PauseInfo]
    limits: list[LimitInfo] = field(default_factory=list)  # declared and overridden limits, with their use


def control(models: Models, engine: sa.Engine, registry: Registry | None = None) -> Control:
    """Schedules (by name), pauses in force (newest first) and the limits in force (declared by ``registry``'s
    tasks or overridden): small tables, read whole."""
    ops = Operations(models, registry)
    return Control(schedules=ops.list_schedules(engine), pauses=ops.pauses(engine), limits=ops.limits(engine))


def token(models: Models, engine: sa.Engine) -> tuple[Any, ...]:
    """The change token (see :func:`venturi_sa.storage.dashboard.token_statement`)."""
    with short_transaction(models, engine) as session:
        return dashboard_store.fetch_token(models, session)
