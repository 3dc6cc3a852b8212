"""Retention of the archive: whole days older than the cutoff are dropped, the straddling day loses rows."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from support.archives import attach_days, noon, partition_names, put, relation_exists
from support.queues import drain
from support.workers import enqueue

from venturi_sa import JobContext, Queue, Task
from venturi_sa.storage import archive

DAY = timedelta(days=1)


class Noop(Task):
    KIND = "noop"

    def run(self, ctx: JobContext) -> None:
        return None


def test_cleanup_drops_whole_old_days_and_deletes_rows_only_where_the_cutoff_falls(
        engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Noop], archive_after=None)
    today = datetime.now(timezone.utc).date()
    first = today - 5 * DAY
    days = attach_days(engine, models, first, 7)  # five past days, today and tomorrow
    for n in range(5):  # two jobs a past day: one finished the evening before, one that noon
        day = first + n * DAY
        put(engine, models, f"a{n}", noon(day) + timedelta(hours=1), noon(day) - timedelta(hours=13))
        put(engine, models, f"b{n}", noon(day) + timedelta(hours=2), noon(day))
    [live] = enqueue(engine, queue, Noop())
    drain(queue, engine)
    cutoff = noon(first + 2 * DAY) - timedelta(hours=1)  # days 0 and 1 wholly before it; day 2 straddles it
    assert queue.cleanup(engine, before=cutoff, dry_run=True) == 5  # a0 b0 a1 b1 a2

    assert queue.cleanup(engine, before=cutoff) == 5
    left = partition_names(engine, models)
    assert left == set(days[2:])
    assert not relation_exists(engine, days[0]) and not relation_exists(engine, days[1])
    with engine.connect() as conn:
        remaining = set(conn.execute(sa.select(models.archive_table.c.id)).scalars())
    assert remaining == {"b2", "a3", "b3", "a4", "b4"}
    assert queue.get_job(engine, live).status == "completed"  # finished now: kept


def test_a_filtered_cleanup_deletes_rows_and_drops_no_day(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Noop], archive_after=None)
    first = datetime.now(timezone.utc).date() - 3 * DAY
    days = attach_days(engine, models, first, 2)
    put(engine, models, "c0", noon(first), noon(first) - timedelta(hours=1))
    put(engine, models, "d0", noon(first), noon(first) - timedelta(hours=1), status="dead")
    put(engine, models, "e1", noon(first + DAY), noon(first + DAY), status="dead", kind="other")
    assert queue.cleanup(engine, older_than=DAY, status="dead", kind="noop") == 1
    assert set(days) <= partition_names(engine, models)
    with engine.connect() as conn:
        assert set(conn.execute(sa.select(models.archive_table.c.id)).scalars()) == {"c0", "e1"}
    assert queue.cleanup(engine, older_than=DAY, status="dead") == 1
    assert queue.cleanup(engine, older_than=DAY) == 1  # c0: its day is dropped whole
    assert not set(days) & partition_names(engine, models)


def test_a_drop_that_cannot_get_its_lock_leaves_the_day_for_the_next_cleanup(
        engine: sa.Engine, models: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive, "LOCK_TIMEOUT", "200ms")
    queue = Queue(models, [Noop], archive_after=None)
    first = datetime.now(timezone.utc).date() - 3 * DAY
    [day] = attach_days(engine, models, first, 1)
    put(engine, models, "f0", noon(first), noon(first) - timedelta(hours=1))
    with engine.connect() as reader:  # a reader of the archive, its transaction open: ACCESS SHARE held
        reader.execute(sa.select(sa.func.count()).select_from(models.archive_table)).scalar_one()
        assert queue.cleanup(engine, older_than=DAY) == 1  # the drop timed out; the row delete does not conflict
        assert day in partition_names(engine, models)
        reader.rollback()
    assert queue.cleanup(engine, older_than=DAY) == 0  # the empty day is dropped now
    assert day not in partition_names(engine, models)
