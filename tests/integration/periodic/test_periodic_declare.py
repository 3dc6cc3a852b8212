"""Declaring schedules: bad declarations are refused at once with nothing written; reconciliation at start."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from support.periodic import Tick, schedule_row, tick_queue

from venturi_sa import InvalidOption, InvalidPayload, Models, Queue, Task, UnknownKind, make_models
from venturi_sa.periodic import reconcile


class Other(Task):
    KIND = "other"

    class Payload(Schema):
        day = fields.String(required=True)


@pytest.mark.parametrize(("options", "message"), [
    ({"cron": "61 * * * *"}, "invalid cron expression '61 \\* \\* \\* \\*'"),
    ({"cron": "* * *"}, "expected 5 fields"),
    ({"cron": "0 3 * * *", "tz": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
    ({"every": timedelta(milliseconds=10)}, "at least 1 second"),
    ({"every": timedelta(seconds=5), "tz": "Europe/Berlin"}, "tz= applies to cron schedules"),
    ({"cron": "0 3 * * *", "every": timedelta(hours=1)}, "exactly one of"),
    ({}, "exactly one of"),
    ({"cron": "0 3 * * *", "catch_up": "sometimes"}, "catch_up must be"),
    ({"cron": "0 3 * * *", "catch_up": "all_within(soon)"}, "catch_up must be"),
    ({"cron": "0 3 * * *", "overlap": "maybe"}, "overlap must be one of"),
    ({"cron": "0 3 * * *", "priority": 7}, "priority must be"),
])
def test_bad_declarations_are_refused_naming_the_problem(options: dict[str, object], message: str) -> None:
    queue = tick_queue("decl")
    with pytest.raises(InvalidOption, match=message):
        queue.schedule(Tick(n=1), **options)  # type: ignore[arg-type]
    assert len(queue.schedules) == 0


def test_unknown_kind_and_bad_payload_are_refused() -> None:
    queue = tick_queue("decl")
    with pytest.raises(UnknownKind, match="unknown task kind 'other'"):
        queue.schedule(Other(day="mon"), cron="0 3 * * *")
    with pytest.raises(InvalidPayload, match="day"):
        queue.schedule(Other(), cron="0 3 * * *")  # the payload fails its schema as the task is built
    with pytest.raises(InvalidOption, match="declared twice"):
        queue.schedule(Tick(n=1), cron="0 3 * * *", name="nightly")
        queue.schedule(Tick(n=2), cron="0 4 * * *", name="nightly")
    assert [s.name for s in queue.schedules] == ["nightly"]


def test_a_task_type_schedule_is_validated_when_registered() -> None:
    class Bad(Task):
        KIND = "bad"
        schedule = "every day"

    with pytest.raises(InvalidOption, match="invalid cron expression 'every day'"):
        Queue(make_models("decl"), [Bad])
    queue = Queue(make_models("decl"), [])
    with pytest.raises(InvalidOption):
        queue.register(Bad)
    assert "bad" not in queue.registry and len(queue.schedules) == 0


def test_nothing_is_written_for_refused_declarations(engine: sa.Engine, models: Models) -> None:
    queue = tick_queue(models.prefix)
    queue.schedule(Tick(n=1), every=timedelta(minutes=5), name="good")
    for bad in ({"cron": "bad"}, {"cron": "0 3 * * *", "tz": "Nowhere/City"}):
        with pytest.raises(InvalidOption):
            queue.schedule(Tick(n=2), **bad)  # type: ignore[arg-type]
    reconcile(queue, engine)
    with engine.connect() as conn:
        names = conn.execute(sa.select(models.schedules_table.c.name)).scalars().all()
    assert names == ["good"]


def test_several_schedules_per_kind_and_task_type_schedules(engine: sa.Engine, models: Models) -> None:
    class Nightly(Task):
        KIND = "nightly"
        schedule = ["0 3 * * *", "30 4 * * 1"]

    queue = tick_queue(models.prefix, Nightly)
    queue.schedule(Tick(n=1), cron="0 * * * *", tz="Europe/Berlin")
    queue.schedule(Tick(n=2), cron="0 * * * *", tz="Europe/Berlin", name="tick-2", priority=0)
    report = reconcile(queue, engine)
    assert sorted(report.added) == ["nightly@0 3 * * *", "nightly@30 4 * * 1", "tick-2", "tick@0 * * * *"]
    row = schedule_row(engine, models, "tick-2")
    assert (row.kind, row.payload, row.priority, row.tz) == ("tick", {"n": 2}, 0, "Europe/Berlin")
    assert row.next_at.minute == 0 and row.next_at.second == 0


def test_reconciliation_adds_changes_and_removes_across_restarts(engine: sa.Engine, models: Models) -> None:
    first = tick_queue(models.prefix)
    first.schedule(Tick(n=1), every=timedelta(hours=1), name="keep")
    first.schedule(Tick(n=1), every=timedelta(hours=1), name="change")
    first.schedule(Tick(n=1), every=timedelta(hours=1), name="drop")
    assert sorted(reconcile(first, engine).added) == ["change", "drop", "keep"]
    kept_next = schedule_row(engine, models, "keep").next_at

    second = tick_queue(models.prefix)  # the next deploy
    second.schedule(Tick(n=1), every=timedelta(hours=1), name="keep")
    second.schedule(Tick(n=9), every=timedelta(minutes=10), name="change", overlap="skip")
    second.schedule(Tick(n=1), every=timedelta(hours=1), name="new")
    report = reconcile(second, engine)
    assert (report.added, report.changed, report.removed) == (["new"], ["change"], ["drop"])
    assert schedule_row(engine, models, "keep").next_at == kept_next
    changed = schedule_row(engine, models, "change")
    assert (changed.payload, changed.timing, changed.overlap) == ({"n": 9}, "every:600", "skip")
    assert changed.next_at.minute % 10 == 0
    assert schedule_row(engine, models, "drop").removed_at is not None

    assert reconcile(second, engine) == type(report)()  # a restart with the same code changes nothing
    third = tick_queue(models.prefix)
    third.schedule(Tick(n=1), every=timedelta(hours=1), name="drop")  # declared again: revived
    report = reconcile(third, engine)
    assert report.changed == ["drop"] and sorted(report.removed) == ["change", "keep", "new"]
    assert schedule_row(engine, models, "drop").removed_at is None
