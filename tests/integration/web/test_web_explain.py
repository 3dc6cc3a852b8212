"""Each dashboard page's queries use the intended seed indexes on a big table, in a bounded number.

The statements explained are the builders the pages run.  The table holds
``VENTURI_WEB_EXPLAIN_ROWS`` terminal jobs (default 50k, so CI stays fast;
set it to 1000000 to check the plans at 1M rows and print them with ``-s``),
each with one journal entry, spread over the last ten days, the newest within
the hour; plus 500 live rows (``support.bigqueue``; ``bench/webplans.py`` explains
every page on the same data at 1M rows).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from starlette.testclient import TestClient
from support.bigqueue import seed_big
from support.ops import assert_plan, nodes, plan_of
from support.web import counted

from venturi_sa import Models
from venturi_sa.storage import dashboard as sql
from venturi_sa.storage import journal_pages
from venturi_sa.storage import stats as stats_sql
from venturi_sa.web import create_app

ROWS = int(os.environ.get("VENTURI_WEB_EXPLAIN_ROWS", "50000"))
SHOW = bool(os.environ.get("VENTURI_WEB_EXPLAIN_SHOW"))

@pytest.fixture(scope="module")
def big(engine: sa.Engine) -> tuple[Models, datetime]:
    return seed_big(engine, "webx", ROWS)


ALLOWED = ("jobs_created", "jobs_pkey", "jobs_history", "jobs_finished", "jobs_lease", "jobs_visible",
           "jobs_claim", "jobs_claim_priority", "journal_job", "journal_pkey")


def _uses(engine: sa.Engine, statement: Any, models: Models, *expected: str, sort_ok: bool = False) -> None:
    assert_plan(engine, statement, models, all_of=expected, allowed=ALLOWED, sort_ok=sort_ok, show=SHOW)


def _page(**filters: Any) -> sql.JobPageParams:
    return sql.JobPageParams(filter=sql.JobFilter(**filters), limit=50)


def test_job_pages_walk_jobs_created_backwards(engine: sa.Engine, big: tuple[Models, datetime]) -> None:
    models, now = big
    _uses(engine, sql.job_page_statement(models, _page()), models, "jobs_created", "jobs_pkey")
    later = sql.JobPageParams(filter=sql.JobFilter(), after=(now - timedelta(days=5), "0" * 26))
    _uses(engine, sql.job_page_statement(models, later), models, "jobs_created")
    window = _page(created_after=now - timedelta(hours=1))
    _uses(engine, sql.job_page_statement(models, window), models, "jobs_created")
    oldest = sql.JobPageParams(filter=sql.JobFilter(), after=(now - timedelta(days=5), "0" * 26), oldest_first=True)
    _uses(engine, sql.job_page_statement(models, oldest), models, "jobs_created")
    narrowed = sql.JobPageParams(filter=sql.JobFilter(kind="kind_3"), oldest_first=True)
    _uses(engine, sql.job_page_statement(models, narrowed), models, "jobs_created", sort_ok=True)


@pytest.mark.parametrize("filters", [
    {"statuses": ("dead",)}, {"kind": "kind_3"}, {"statuses": ("pending",), "kind": "kind_4"},
    {"text": "order"}, {"text": "run of 0000", "statuses": ("completed",)},
], ids=lambda f: "-".join(f))
def test_filtered_pages_read_a_bounded_walk(engine: sa.Engine, big: tuple[Models, datetime],
                                            filters: dict[str, Any]) -> None:
    models, _ = big
    _uses(engine, sql.job_page_statement(models, _page(**filters)), models, "jobs_created", sort_ok=True)
    _uses(engine, sql.walk_end_statement(models, _page(**filters)), models, "jobs_created", sort_ok=True)


@pytest.mark.parametrize("window", ["hour", "day"])
def test_charts_read_the_window_through_the_primary_key_and_jobs_finished(
        engine: sa.Engine, big: tuple[Models, datetime], window: str) -> None:
    from venturi_sa.web.queries import WINDOWS

    models, now = big
    span, seconds = WINDOWS[window]
    params = sql.WindowParams(span=span, bucket_seconds=seconds)
    _uses(engine, sql.activity_statement(models, params), models, "journal_pkey", sort_ok=True)
    with engine.connect() as conn:
        floor = conn.execute(sa.select(sql.journal_floor(models, params.since()))).scalar_one()
    _uses(engine, sql.activity_statement(models, params, floor), models, "journal_pkey", sort_ok=True)
    _uses(engine, sql.latency_statement(models, params), models, "jobs_finished", sort_ok=True)
    _uses(engine, sql.finished_counts_statement(models, params), models, "jobs_finished", sort_ok=True)


def test_overview_counts_read_live_rows_and_dead_rows_only(engine: sa.Engine, big: tuple[Models, datetime]) -> None:
    models, _ = big
    _uses(engine, stats_sql.pending_statement(models), models, sort_ok=True)
    _uses(engine, stats_sql.expired_statement(models), models, "jobs_lease", sort_ok=True)
    _uses(engine, sql.claimed_counts_statement(models), models, sort_ok=True)
    _uses(engine, sql.dead_counts_statement(models), models, "jobs_history")


def test_the_journal_floor_finds_the_window_start(engine: sa.Engine, big: tuple[Models, datetime]) -> None:
    models, now = big
    entry = models.journal_table
    since = now - timedelta(hours=1)
    with engine.connect() as conn:
        bound = sa.literal(since, sa.DateTime(timezone=True))
        floor = conn.execute(sa.select(sql.journal_floor(models, bound))).scalar_one()
        exact = conn.execute(sa.select(sa.func.min(entry.c.id)).where(entry.c.recorded_at >= since)).scalar_one()
    assert floor == exact


def test_workers_the_change_token_and_last_errors_use_their_indexes(
        engine: sa.Engine, big: tuple[Models, datetime]) -> None:
    models, _ = big
    _uses(engine, sql.workers_statement(models), models, "jobs_lease", sort_ok=True)
    _uses(engine, sql.claimed_statement(models), models, "jobs_lease")
    _uses(engine, sql.token_statement(models), models, "journal_pkey", "jobs_created")
    with engine.connect() as conn:
        page = list(conn.execute(sa.select(models.jobs_table.c.id).order_by(
            models.jobs_table.c.created_at.desc()).limit(50)).scalars())
    _uses(engine, sql.last_errors_statement(models, page), models, "journal_job", sort_ok=True)


# The overview reads the archive's dead counts, finished jobs and journal window too (+3); a jobs page the
# archive's page (+1) and, for a filtered page, where the archive's walk ended (+1).  The schedules page
# and explain read the limit overrides (+1 each).  The overview splits the jobs not due yet by why they wait
# and reads the pauses in force (+2).
PAGES = {"/": 14, "/?window=day": 14, "/fragment/overview": 14, "/jobs": 3, "/jobs?status=dead&kind=kind_0": 5,
         "/jobs?q=nothing-matches-this": 4, "/workers": 2, "/fragment/jobs": 3, "/schedules": 3}


def test_the_jobs_not_due_are_split_through_jobs_visible(engine: sa.Engine, big: tuple[Models, datetime]) -> None:
    """The jobs table through its partial pending index; the (here empty) steps table only for those jobs."""
    models, _ = big
    plan = plan_of(engine, stats_sql.not_due_statement(models))
    scanned = {(n["Node Type"], n.get("Relation Name"), n.get("Index Name")) for n in nodes(plan)}
    assert ("Index Scan", models.names.jobs, models.names.index("jobs_visible")) in scanned, scanned
    assert not any(kind == "Seq Scan" and table == models.names.jobs for kind, table, _ in scanned), scanned


def test_a_job_pages_journal_reads_through_journal_job(engine: sa.Engine, big: tuple[Models, datetime]) -> None:
    models, _ = big
    job = {"job_id": "00000000000000000000000500"}
    page = journal_pages.page_statement(models).bindparams(start=0, limit=51, **job)
    _uses(engine, page, models, "journal_job", sort_ok=True)  # the fold's window runs over the job's rows only
    summary = journal_pages.summary_statement(models).bindparams(**job)
    _uses(engine, summary, models, "journal_job")


def test_every_page_runs_a_bounded_number_of_queries(engine: sa.Engine, big: tuple[Models, datetime]) -> None:
    models, _ = big
    app = create_app(engine, models.prefix, listen=False)
    with TestClient(app) as client:
        job_id = client.get("/jobs").text.split('name="ids" value="')[1].split('"')[0]
        # a job's page: its view (row, fire, time limit) and clock (2), a page of each list (6: the job's
        # existence, journal lines and summary, parents, dependents, steps); a pending job adds explain's
        for url, most in {**PAGES, f"/jobs/{job_id}": 12, f"/fragment/jobs/{job_id}": 12}.items():
            with counted(engine) as statements:
                response = client.get(url)
            assert response.status_code == 200, url
            assert len(statements) <= most, (url, statements)
