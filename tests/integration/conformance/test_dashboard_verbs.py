"""Conformance of the dashboard's read verbs: dashboard_jobs, _counts, _activity, _latency, _job, _workers, _token.

Per driver and runner kind, like the operations verbs (the ``runner`` fixture is the tier's conftest's).
"""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa
from support.drivers import OpenRunner
from test_ops_verbs import built

from venturi_sa import Models
from venturi_sa.storage import dashboard as dashboard_store
from venturi_sa.storage import journal_pages as journal_store
from venturi_sa.storage.dashboard import JobFilter, JobPageParams, WindowParams
from venturi_sa.storage.journal_pages import JournalPageParams

HOUR = WindowParams(span=timedelta(hours=1), bucket_seconds=60)


def test_dashboard_jobs_filters_pages_and_stops_a_bounded_walk(engine: sa.Engine, models: Models,
                                                               runner: OpenRunner) -> None:
    with built(engine, models) as (Job, Entry):
        dead = Job(dead=True, kind="b", payload={"why": "100% broken"})  # the oldest: the walk's end
        Entry(job=dead, dead=True, note="gave up on the_thing")
        dead_id = dead.id
        made = {Job(kind="a", payload={"n": i}).id for i in range(7)}
    with runner() as r:
        first = dashboard_store.fetch_job_page(models, r, JobPageParams(filter=JobFilter(), limit=5))
        rest = dashboard_store.fetch_job_page(models, r,
                                              JobPageParams(filter=JobFilter(), limit=5, after=first.next_after))
        by_kind = dashboard_store.fetch_job_page(models, r,
                                                 JobPageParams(filter=JobFilter(kind="a", statuses=("pending",))))
        noted = dashboard_store.fetch_job_page(models, r, JobPageParams(filter=JobFilter(text="THE_THING")))
        literal = dashboard_store.fetch_job_page(models, r, JobPageParams(filter=JobFilter(text="100%")))
        wild = dashboard_store.fetch_job_page(models, r, JobPageParams(filter=JobFilter(text="1_0")))
        short = dashboard_store.fetch_job_page(models, r, JobPageParams(filter=JobFilter(kind="b"), limit=5, scan=3))
    assert len(first.rows) == 5 and len(rest.rows) == 3 and rest.next_after is None
    assert {row.id for row in [*first.rows, *rest.rows]} == made | {dead_id}
    assert {row.id for row in by_kind.rows} == made
    assert [row.id for row in noted.rows] == [dead_id] == [row.id for row in literal.rows]
    assert wild.rows == []  # "_" matches itself only
    assert short.rows == [] and short.next_after is not None and short.scanned_to is not None  # stopped at 3


def test_dashboard_counts_activity_and_latency(engine: sa.Engine, models: Models,
                                               runner: OpenRunner) -> None:
    with built(engine, models) as (Job, Entry):
        Job(kind="a")
        Job(claimed=True, kind="a")
        Job(expired=True, kind="b")
        done = Job(completed=True, kind="a")
        Entry(job=done)
        Entry(retried=True, job=Job(claimed=True, kind="b"))
        Entry(dead=True, job=Job(dead=True, kind="b"))
    with runner() as r:
        counts = dashboard_store.fetch_overview_counts(models, r, HOUR)
        activity = dashboard_store.fetch_activity(models, r, HOUR)
        latency = dashboard_store.fetch_latency(models, r, HOUR)
    assert {(p.kind, p.eligible) for p in counts.pending} == {("a", 1)}
    assert sorted(counts.claimed) == [("a", 1), ("b", 2)] and counts.expired == [("b", 1)]
    assert counts.dead == [("b", 1)]
    assert sorted(counts.finished) == [("a", "completed", 1), ("b", "dead", 1)]
    assert sorted((row[1], row[2]) for row in activity) == [("completed", 1), ("dead", 1), ("retried", 1)]
    assert [row[3] for row in latency] == [1] and latency[0][1] >= 0


def test_dashboard_job_workers_and_token(engine: sa.Engine, models: Models,
                                         runner: OpenRunner) -> None:
    with built(engine, models) as (Job, Entry):
        held = Job(claimed=True, kind="a")
        Job(expired=True, kind="b", claimed_by=held.claimed_by)
        Entry(job=held, retried=True)
        held_id, worker = held.id, held.claimed_by
    with runner() as r:
        detail = dashboard_store.fetch_job_detail(models, r, held_id)
        missing = dashboard_store.fetch_job_detail(models, r, "01J00000000000000000000000")
        grouped, claimed = dashboard_store.fetch_workers(models, r)
        token = dashboard_store.fetch_token(models, r)
        lines = journal_store.journal_page(models, r, JournalPageParams(job_id=held_id))
        summary = journal_store.journal_summary(models, r, held_id)
    assert detail.row is not None and detail.row.id == held_id and [line.entries for line in lines] == [1]
    assert (summary.total, summary.last_outcome) == (1, lines[0].outcome)
    assert detail.now is not None and missing.row is None
    assert (detail.row.fire_schedule, detail.row.timeout) == (None, None)  # the job view: no fire, no own limit
    ((name, n, expired, kinds, *_),) = [tuple(g) for g in grouped]
    assert (name, n, expired, sorted(kinds)) == (worker, 2, 1, ["a", "b"])
    assert len(claimed) == 2
    assert token[0] == lines[0].id
    with built(engine, models) as (Job, _):
        Job(kind="c")
    with runner() as r:
        assert dashboard_store.fetch_token(models, r) != token
