"""``venturi archive``: the operator's move of finished jobs to the archive, through the queue's face."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from support.archives import places
from support.cli import fails, ok, plain_url
from support.cli import invoke as run
from support.factories import db_now
from support.ops import factory_session

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def db(pg_url: str, prefix: str, models: Any) -> list[str]:
    """``--dsn``/``--prefix`` arguments for this test's migrated queue."""
    return ["--dsn", plain_url(pg_url), "--prefix", prefix]


def test_archive_moves_finished_jobs_older_than_the_duration(db: list[str], engine: sa.Engine, models: Any) -> None:
    ten_days_ago = db_now(-timedelta(days=10))
    with factory_session(engine, models) as (Job, Entry):
        old = [*Job.create_batch(3, kind="mail", completed=True, finished_at=ten_days_ago),
               *Job.create_batch(2, kind="report", dead=True, finished_at=ten_days_ago)]
        for job in old:
            Entry(job=job)
        recent = Job(kind="mail", completed=True)
        live = [Job(kind="mail"), Job(kind="mail", claimed=True)]
        old_ids, recent_id, live_ids = [j.id for j in old], recent.id, {j.id for j in live}

    data = json.loads(ok(run("archive", *db, "--older-than", "7d", "--batch-size", "2", "--json")).stdout)
    assert data == {"archived": 5, "older_than_seconds": 7 * 86400.0}
    in_jobs, archived, entries = places(engine, models)
    assert sorted(archived) == sorted(old_ids) and in_jobs == {recent_id, *live_ids}
    assert not set(entries) & set(old_ids)  # the journal went with its jobs

    assert ok(run("archive", *db)).stdout.strip() == "archived 0 jobs finished more than 1m ago"
    assert ok(run("archive", *db, "--older-than", "0s")).stdout.strip() == "archived 1 jobs finished more than 0s ago"
    in_jobs, archived, _ = places(engine, models)
    assert in_jobs == live_ids and recent_id in archived
    assert json.loads(ok(run("stats", *db, "--json")).stdout)["by_kind"]["report"]["dead"] == 2


def test_a_bad_duration_fails_in_one_line(db: list[str]) -> None:
    fails(run("archive", *db, "--older-than", "7x"), "invalid duration '7x'")
