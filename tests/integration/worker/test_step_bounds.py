"""Bounds at the durable steps' boundaries: signals kept per job, sleep and wait lengths, ids of signals.

``queue.signal`` refuses a signal past the queue's per-job caps
(``max_signals_per_job``, ``max_signal_bytes_per_job``) with
``TooManySignals`` and writes nothing; ``ctx.sleep``, ``ctx.sleep_until``
and ``ctx.wait_for`` refuse a length past 100 years with ``InvalidOption``
before anything is recorded (the database's timestamps end long before
``timedelta.max``); a job id that is not a ULID is ``InvalidJobId`` before
any SQL.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from support.hooks import drain
from support.workers import enqueue

from venturi_sa import InvalidJobId, InvalidOption, JobContext, Queue, Task, TooManySignals

seen: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    seen.clear()


class Waits(Task):
    KIND = "bounded_waits"

    def run(self, ctx: JobContext) -> Any:
        return ctx.wait_for("never", timeout=timedelta(minutes=5))


def _signal_rows(engine: sa.Engine, models: Any, job_id: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(models.signals_table)
                                .where(models.signals_table.c.job_id == job_id)).scalar_one())


def test_signals_past_the_per_job_count_are_refused_with_nothing_written(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Waits], max_signals_per_job=3)
    [job_id] = enqueue(engine, queue, Waits())
    for n in range(3):
        assert queue.signal(engine, job_id, f"s{n}", n).result == "stored"
    with pytest.raises(TooManySignals, match=r"holds 3 signals .* cap of 3 signals"):
        queue.signal(engine, job_id, "s3", 3)
    assert queue.signal(engine, job_id, "s0", 0).result == "duplicate"  # a repeat stores nothing: still fine
    assert _signal_rows(engine, models, job_id) == 3


def test_signals_past_the_per_job_bytes_are_refused_with_nothing_written(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Waits], max_signal_bytes_per_job=1000)
    [job_id] = enqueue(engine, queue, Waits())
    assert queue.signal(engine, job_id, "first", "x" * 600).result == "stored"
    with pytest.raises(TooManySignals, match="1000 bytes"):
        queue.signal(engine, job_id, "second", "y" * 600)
    assert queue.signal(engine, job_id, "small", "z").result == "stored"
    assert _signal_rows(engine, models, job_id) == 2


def test_the_signal_caps_have_defaults_and_are_checked(models: Any) -> None:
    caps = Queue(models, [Waits]).signal_caps
    assert (caps.count, caps.total_bytes) == (1000, 16 * 1024 * 1024)
    for bad in ({"max_signals_per_job": 0}, {"max_signal_bytes_per_job": 2**31}, {"max_signals_per_job": "9"}):
        with pytest.raises(InvalidOption, match=next(iter(bad))):
            Queue(models, [Waits], **bad)


def test_ids_that_cannot_be_job_ids_are_refused_before_any_sql(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Waits])
    for bad in ("01HZZ\x000000000000000000000", "x" * 10_000, "no-such-job", ""):
        with pytest.raises(InvalidJobId, match="must be a ULID"):
            queue.signal(engine, bad, "go")
        with pytest.raises(InvalidJobId, match="must be a ULID"):
            queue.cancel(engine, bad)
        with pytest.raises(InvalidJobId, match="must be a ULID"):
            queue.get_job(engine, bad)
        with pytest.raises(InvalidJobId, match="must be a ULID"):
            queue.edit(engine, bad, priority=0)


class Sleeps(Task):
    KIND = "bounded_sleeps"

    def run(self, ctx: JobContext) -> Any:
        for name, attempt in (
            ("sleep", lambda: ctx.sleep(timedelta.max, name="forever")),
            ("sleep seconds", lambda: ctx.sleep(1e300, name="forever-s")),
            ("sleep_until", lambda: ctx.sleep_until(datetime.max.replace(tzinfo=timezone.utc), name="end")),
            ("wait_for", lambda: ctx.wait_for("never", timeout=timedelta.max)),
            ("wait_for seconds", lambda: ctx.wait_for("never", timeout=10.0**15)),
        ):
            try:
                attempt()
            except InvalidOption as exc:
                seen.append(f"{name}: {exc}")
        return "done"


def test_sleeps_and_waits_past_100_years_are_refused_before_anything_is_recorded(engine: sa.Engine,
                                                                                  models: Any) -> None:
    queue = Queue(models, [Sleeps])
    [job_id] = enqueue(engine, queue, Sleeps())
    drain(queue, engine)
    assert queue.get_job(engine, job_id).status == "completed"
    assert len(seen) == 5 and all("100 years" in line for line in seen), seen
    assert queue.steps(engine, job_id) == []
