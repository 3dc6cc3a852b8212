"""Issue 23, defect 3: one bad schedule must not stop the others, and must be logged at ERROR.

Another service sharing the prefix stored two schedules this worker cannot
compute: February 30 (croniter finds no such date) and a time zone this
machine does not have.  They are inserted as that service would have
stored them, due before the worker's own schedule.  The worker's own
schedule keeps firing; each bad one is logged at ERROR, backed off (not
retried on every pass), and left as it was.  Declaring February 30 in code
is refused, naming the schedule and the expression.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
import sqlalchemy as sa
from support.probes import running
from support.waiting import Events

from venturi_sa import JobContext, Models, Queue, Task, Worker
from venturi_sa.errors import InvalidOption
from venturi_sa.periodic import reconcile

pytestmark = pytest.mark.timeout(60)
BAD = {"feb30": ("cron:0 0 30 2 *", "UTC"), "marstime": ("cron:* * * * *", "Mars/Olympus_Mons")}


class Beat(Task):
    KIND = "beat"

    def run(self, ctx: JobContext) -> None:
        return None


def store_foreign_schedules(engine: sa.Engine, models: Models) -> None:
    """The rows another service's declarations left, due an hour ago (before the good one)."""
    table = models.schedules_table
    with engine.begin() as conn:
        now = conn.execute(sa.select(sa.func.statement_timestamp())).scalar_one()
        for name, (timing, tz) in BAD.items():
            conn.execute(sa.insert(table).values(
                name=name, kind="elsewhere", payload={}, priority=1, timing=timing, tz=tz, catch_up="latest",
                overlap="allow", next_at=now - timedelta(hours=1), updated=now))


def test_a_bad_stored_schedule_is_logged_and_backed_off_while_the_good_one_keeps_firing(
        engine: sa.Engine, models: Models, caplog: pytest.LogCaptureFixture) -> None:
    queue = Queue(models, [Beat])
    queue.schedule(Beat(), every=timedelta(seconds=1), name="good")
    reconcile(queue, engine)
    store_foreign_schedules(engine, models)
    events = Events()
    caplog.set_level(logging.ERROR, logger="venturi_sa.periodic")
    with running(Worker(queue, engine, poll_interval=0.2, on_event=events)):
        for n in range(1, 4):  # three fires: seconds apart, well after both bad ones were tried
            events.wait_for("schedule_fired", after=0 if n == 1 else events.mark(), schedule="good")
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    for name in BAD:
        mine = [m for m in errors if m.startswith(f"schedule {name}:")]
        assert mine, f"no ERROR about schedule {name}; errors: {errors}"
        assert len(mine) <= 3, f"schedule {name} was retried on every pass, not backed off: {mine}"
    assert any("Mars/Olympus_Mons" in m for m in errors), errors
    table = models.schedules_table
    with engine.connect() as conn:
        stored = {r.name: r.fired for r in conn.execute(sa.select(table.c.name, table.c.fired))}
    assert stored["feb30"] == stored["marstime"] == 0
    assert stored["good"] >= 3


@pytest.mark.parametrize("expression", ["0 0 30 2 *", "0 0 31 4 *"])
def test_declaring_a_cron_expression_that_never_fires_is_refused(models: Models, expression: str) -> None:
    queue = Queue(models, [Beat])
    with pytest.raises(InvalidOption) as refused:
        queue.schedule(Beat(), cron=expression, name="never")
    message = str(refused.value)
    assert "'never'" in message and repr(expression) in message and "no next fire time" in message
    assert queue.schedules.get("never") is None


def test_a_task_type_declaring_february_30_is_refused_at_registration(models: Models) -> None:
    class Leap(Task):
        KIND = "leap"
        schedule = "0 0 30 2 *"

        def run(self, ctx: JobContext) -> None:
            return None

    with pytest.raises(InvalidOption, match=r"schedule 'leap'.*'0 0 30 2 \*'.*no next fire time"):
        Queue(models, [Leap])
