"""The dashboard reads the archive too: the jobs list (keyset pages, filters, scan budget), one job, the
overview's counts and charts, and an action's selection."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import sqlalchemy as sa
from support.queues import drain
from support.workers import enqueue

from venturi_sa import Die, JobContext, Queue, Task

queries = pytest.importorskip("venturi_sa.web.queries")
from venturi_sa.storage.dashboard import JobFilter, JobPageParams  # noqa: E402


class Ok(Task):
    KIND = "ok"

    def run(self, ctx: JobContext) -> Any:
        return {"done": True}


class Bad(Task):
    KIND = "bad"

    def run(self, ctx: JobContext) -> Die:
        return Die("needle in the note")


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [Ok, Bad], archive_after=None)


def pages(models: Any, engine: sa.Engine, flt: JobFilter, limit: int, **options: Any) -> list[str]:
    params = JobPageParams(filter=flt, limit=limit, errors=True, **options)
    ids: list[str] = []
    while True:
        page = queries.jobs(models, engine, params)
        ids += [job.id for job in page.items]
        if page.next_after is None:
            return ids
        params = replace(params, after=page.next_after)


def everything(models: Any, engine: sa.Engine, queue: Queue) -> dict[str, Any]:
    flts = {"all": JobFilter(), "dead": JobFilter(statuses=("dead",)), "needle": JobFilter(text="needle"),
            "ok": JobFilter(kind="ok")}
    lists = {name: pages(models, engine, flt, limit) for name, flt in flts.items() for limit in (2, 5)}
    lists["budget"] = pages(models, engine, JobFilter(text="needle"), 2, scan=3)
    lists["oldest"] = pages(models, engine, JobFilter(), 3, oldest_first=True)
    return lists


def test_the_dashboard_shows_the_same_before_and_after_archiving(
        engine: sa.Engine, models: Any, queue: Queue) -> None:
    ids = enqueue(engine, queue, *(Ok() if i % 3 else Bad() for i in range(12)))
    drain(queue, engine)
    [pending] = enqueue(engine, queue, Ok())
    before = everything(models, engine, queue)
    overview = queries.overview(models, engine, "hour")
    details = {i: replace(queries.detail(models, engine, i), now=None) for i in ids}
    errors = queries.jobs(models, engine, JobPageParams(filter=JobFilter(), limit=50, errors=True)).errors
    assert queue.archive(engine) == 12

    assert everything(models, engine, queue) == before
    assert before["all"] == [pending, *reversed(ids)] and len(before["needle"]) == 4
    after = queries.overview(models, engine, "hour")
    assert after.counts.by_kind == overview.counts.by_kind
    if after.throughput.starts == overview.throughput.starts:
        assert after.throughput.values == overview.throughput.values
        assert after.latency.values["p50"] == overview.latency.values["p50"]
    else:  # the clock crossed a bucket boundary between the two reads: the same runs, one bucket over
        assert {k: sum(v) for k, v in after.throughput.values.items()} == {
            k: sum(v) for k, v in overview.throughput.values.items()}
    assert {i: replace(queries.detail(models, engine, i), now=None) for i in ids} == details
    assert queries.jobs(models, engine, JobPageParams(filter=JobFilter(), limit=50, errors=True)).errors == errors
    assert queries.selection(models, engine, [ids[0], ids[1], pending, "nope"]) == {
        ids[0]: ("bad", "dead"), ids[1]: ("ok", "completed"), pending: ("ok", "pending")}
