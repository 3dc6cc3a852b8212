"""The limited claim's SQL: budgets per kind and per key, checked per row; fair turns; rates; overrides; pauses."""

from __future__ import annotations

import select
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, fields
from support.async_engines import async_engine_fixture  # noqa: F401 - the async_engine fixture
from support.workers import enqueue

from venturi_sa import Queue, Rate, Task
from venturi_sa.storage import limited_claim, limits, pauses
from venturi_sa.storage.params import ClaimedJob, ClaimParams
from venturi_sa.task import declared_limits_of


class Tenant(Schema):
    tenant = fields.String(required=True)
    n = fields.Integer(load_default=0)


def _claim(engine: sa.Engine, models: Any, tasks: list[type[Task]], limit: int = 100,
           caps: dict[str, int] | None = None) -> list[ClaimedJob]:
    params = ClaimParams(worker_id="w:1", kinds=[t.KIND for t in tasks], limit=limit, leases={},
                         default_lease=timedelta(seconds=60), caps=caps or {}, limits=declared_limits_of(tasks))
    with engine.begin() as conn:
        return limited_claim.claim(models, conn, params)


def _finish(engine: sa.Engine, models: Any, jobs: list[ClaimedJob]) -> None:
    job = models.jobs_table
    with engine.begin() as conn:
        conn.execute(sa.update(job).where(job.c.id.in_([j.id for j in jobs]))
                     .values(status="completed", finished_at=sa.func.now()))


def _tenants(jobs: list[ClaimedJob]) -> list[str]:
    return [j.payload["tenant"] for j in jobs]


def test_global_concurrency_budget_counts_claimed_rows(engine: sa.Engine, models: Any) -> None:
    class Partner(Task):
        KIND = "partner"
        global_concurrency = 3

    queue = Queue(models, [Partner])
    enqueue(engine, queue, *[Partner() for _ in range(10)])
    first = _claim(engine, models, [Partner])
    assert len(first) == 3
    assert _claim(engine, models, [Partner]) == []
    _finish(engine, models, first[:2])
    assert len(_claim(engine, models, [Partner])) == 2
    assert _claim(engine, models, [Partner], caps={"partner": 1}) == []


def test_key_budget_is_checked_per_row_and_none_is_exempt(engine: sa.Engine, models: Any) -> None:
    class Export(Task):
        KIND = "export"
        Payload = Tenant
        key_concurrency = 2

        def limit_key(self) -> str | None:
            return self.payload["tenant"] or None

    queue = Queue(models, [Export])
    enqueue(engine, queue, *[Export(tenant=t) for t in "aaaaabbbbb"], *[Export(tenant="") for _ in range(3)])
    claimed = _claim(engine, models, [Export])
    assert sorted(_tenants(claimed)) == ["", "", "", "a", "a", "b", "b"]
    assert _claim(engine, models, [Export]) == []


def test_fair_turns_across_keys_oldest_last_claim_first(engine: sa.Engine, models: Any) -> None:
    class Export(Task):
        KIND = "fair_export"
        Payload = Tenant

        def limit_key(self) -> str | None:
            return self.payload["tenant"]

    queue = Queue(models, [Export])
    for i in range(50):
        enqueue(engine, queue, Export(tenant="big", n=i))
    enqueue(engine, queue, Export(tenant="small", n=0))
    enqueue(engine, queue, Export(tenant="late", n=0))
    first = _claim(engine, models, [Export], limit=1)
    assert [(j.payload["tenant"], j.payload["n"]) for j in first] == [("big", 0)]
    second = _claim(engine, models, [Export], limit=2)
    assert sorted(_tenants(second)) == ["late", "small"]  # never claimed before goes first
    third = _claim(engine, models, [Export], limit=4)
    assert [(j.payload["tenant"], j.payload["n"]) for j in third] == [("big", 1), ("big", 2), ("big", 3),
                                                                       ("big", 4)]


def test_round_robin_within_one_claim(engine: sa.Engine, models: Any) -> None:
    class Export(Task):
        KIND = "rr_export"
        Payload = Tenant

        def limit_key(self) -> str | None:
            return self.payload["tenant"]

    queue = Queue(models, [Export])
    enqueue(engine, queue, *[Export(tenant="a", n=i) for i in range(5)])
    enqueue(engine, queue, *[Export(tenant="b", n=i) for i in range(5)])
    claimed = _claim(engine, models, [Export], limit=4)
    assert sorted((j.payload["tenant"], j.payload["n"]) for j in claimed) == [("a", 0), ("a", 1), ("b", 0),
                                                                              ("b", 1)]


def test_rate_limit_counts_starts_in_the_window(engine: sa.Engine, models: Any) -> None:
    class Call(Task):
        KIND = "rated_call"
        rate_limit = Rate(3, timedelta(hours=1))

    queue = Queue(models, [Call])
    enqueue(engine, queue, *[Call() for _ in range(6)])
    first = _claim(engine, models, [Call])
    assert len(first) == 3
    _finish(engine, models, first)
    assert _claim(engine, models, [Call]) == []  # finished, but their starts still lie in the window
    start = models.Limits.Start
    with engine.begin() as conn:  # the window moves past them
        conn.execute(sa.update(start).values(at=start.at - timedelta(hours=2)))
    assert len(_claim(engine, models, [Call])) == 3


def test_key_rate_limit(engine: sa.Engine, models: Any) -> None:
    class Call(Task):
        KIND = "key_rated"
        Payload = Tenant
        key_rate_limit = Rate(1, timedelta(hours=1))

        def limit_key(self) -> str | None:
            return self.payload["tenant"]

    queue = Queue(models, [Call])
    enqueue(engine, queue, *[Call(tenant=t) for t in "aabbc"])
    first = _claim(engine, models, [Call])
    assert sorted(_tenants(first)) == ["a", "b", "c"]
    _finish(engine, models, first)
    assert _claim(engine, models, [Call]) == []


def test_overrides_add_replace_and_remove_limits(engine: sa.Engine, models: Any) -> None:
    class Plain(Task):
        KIND = "plain_kind"

    class Declared(Task):
        KIND = "declared_kind"
        global_concurrency = 1

    queue = Queue(models, [Plain, Declared])
    enqueue(engine, queue, *[Plain() for _ in range(5)], *[Declared() for _ in range(5)])
    with engine.begin() as conn:
        limits.set_overrides(models, conn, "plain_kind", {"global_concurrency": 2}, "ops")
        limits.set_overrides(models, conn, "declared_kind", {"global_concurrency": None}, "ops")
    claimed = _claim(engine, models, [Plain, Declared])
    assert sorted(j.kind for j in claimed) == ["declared_kind"] * 5 + ["plain_kind"] * 2
    with engine.begin() as conn:
        assert limits.clear_overrides(models, conn, "plain_kind", ["global_concurrency", "rate_limit"],
                                      "ops") == ["global_concurrency"]
        assert [r.action for r in limits.history(models, conn)] == ["clear", "set", "set"]
    assert len(_claim(engine, models, [Plain])) == 3


def test_a_paused_limited_kind_is_not_claimed(engine: sa.Engine, models: Any) -> None:
    class Held(Task):
        KIND = "held_limited"
        global_concurrency = 5

    queue = Queue(models, [Held])
    enqueue(engine, queue, Held(), Held())
    with engine.begin() as conn:
        pauses.pause(models, conn, pauses.PauseParams(kind="held_limited", actor="ops"))
    assert _claim(engine, models, [Held]) == []


def test_key_follows_an_edited_payload(engine: sa.Engine, models: Any) -> None:
    class Export(Task):
        KIND = "edited_export"
        Payload = Tenant
        key_concurrency = 1

        def limit_key(self) -> str | None:
            return self.payload["tenant"]

    queue = Queue(models, [Export])
    first, second = enqueue(engine, queue, Export(tenant="a"), Export(tenant="a"))
    queue.edit(engine, second, payload={"tenant": "b"})
    assert sorted(_tenants(_claim(engine, models, [Export]))) == ["a", "b"]


def test_explain_names_the_limit_and_its_use(engine: sa.Engine, models: Any) -> None:
    class Export(Task):
        KIND = "explained_export"
        Payload = Tenant
        key_concurrency = 1

        def limit_key(self) -> str | None:
            return self.payload["tenant"]

    queue = Queue(models, [Export])
    running, waiting = enqueue(engine, queue, Export(tenant="acme"), Export(tenant="acme"))
    assert "limited" not in queue.explain(engine, waiting).codes
    [claimed] = _claim(engine, models, [Export])
    assert claimed.id == running
    why = queue.explain(engine, waiting)
    assert why.codes[0] == "limited" and "eligible" not in why.codes
    assert "key_concurrency 1 of key 'acme' is full: 1 claimed" in str(why)
    queue.set_limit(engine, "explained_export", key_concurrency=None, global_concurrency=1, actor="ops")
    assert "global_concurrency 1 of kind 'explained_export' is full: 1 claimed" in str(queue.explain(engine, waiting))


def test_drain_ignores_limits(engine: sa.Engine, models: Any) -> None:
    from sqlalchemy.orm import Session

    from venturi_sa.testing import drain

    ran: list[int] = []

    class One(Task):
        KIND = "drained_limited"
        global_concurrency = 1
        rate_limit = Rate(1, timedelta(hours=1))

        def run(self, ctx: Any) -> None:
            ran.append(1)

    queue = Queue(models, [One])
    with Session(engine) as session:
        queue.enqueue_many(session, [One(), One(), One()])
        drain(session, queue)
        session.rollback()
    assert len(ran) == 3


def test_set_limit_refuses_bad_values_and_writes_nothing(engine: sa.Engine, models: Any) -> None:
    import pytest

    from venturi_sa import InvalidOption

    queue = Queue(models, [])
    for bad in ({"global_concurrency": 0}, {"rate_limit": 5}, {"key_concurrency": -1}, {}):
        with pytest.raises(InvalidOption):
            queue.set_limit(engine, "some_kind", **bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match="no patterns"):
        queue.set_limit(engine, "reports.*", global_concurrency=1)
    with pytest.raises(InvalidOption, match="unknown limit"):
        queue.clear_limit(engine, "some_kind", "concurrency")
    assert queue.limits(engine) == []
    infos = queue.set_limit(engine, "some_kind", rate_limit=Rate(100, timedelta(minutes=1)), actor="ops")
    assert [(i.name, i.value, i.source, i.in_use) for i in infos] == [
        ("rate_limit", Rate(100, timedelta(minutes=1)), "override", 0)]
    assert queue.clear_limit(engine, "some_kind") == ["rate_limit"]
    assert queue.limits(engine) == []


def test_the_next_rate_slot_and_the_wake_up_of_a_freed_slot(engine: sa.Engine, models: Any) -> None:
    from venturi_sa.storage.backend import backend_for
    from venturi_sa.storage.params import SoonestParams

    class Call(Task):
        KIND = "slotted_call"
        rate_limit = Rate(2, timedelta(minutes=10))

    queue = Queue(models, [Call])
    enqueue(engine, queue, Call(), Call(), Call())
    with engine.begin() as conn:
        assert backend_for(models).soonest_visible(conn, SoonestParams(kinds=["slotted_call"])) is None
    claimed = _claim(engine, models, [Call])
    assert len(claimed) == 2
    with engine.begin() as conn:
        wait = backend_for(models).soonest_visible(conn, SoonestParams(kinds=["slotted_call"]))
    assert wait is not None and 590 < wait <= 600
    raw = engine.raw_connection()
    raw.detach()
    listener: Any = raw.dbapi_connection  # psycopg2, autocommit, LISTENing on the queue's channel
    listener.autocommit = True
    try:
        with listener.cursor() as cur:
            cur.execute(f'LISTEN "{models.names.channel}"')
        with engine.begin() as writer:  # an unlimited kind's freed slot wakes nobody
            limited_claim.wake_if_limited(models, writer, ["other_kind"])
        with engine.begin() as writer:
            limited_claim.wake_if_limited(models, writer, ["slotted_call"])
        assert select.select([listener], [], [], 10)[0]
        listener.poll()
        assert len(listener.notifies) == 1
    finally:
        listener.close()


def test_a_bad_limit_key_is_refused_before_anything_is_written(engine: sa.Engine, models: Any) -> None:
    import pytest
    from sqlalchemy.orm import Session

    from venturi_sa import InvalidOption

    class Export(Task):
        KIND = "bad_key_export"
        Payload = Tenant

        def limit_key(self) -> str | None:
            return self.payload["tenant"]

    queue = Queue(models, [Export])
    with Session(engine) as session:
        with pytest.raises(InvalidOption, match="limit_key"):
            queue.enqueue_many(session, [Export(tenant="a"), Export(tenant="")])
        assert not session.new
        session.commit()
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(models.jobs_table)).scalar_one() == 0


def test_stats_count_the_jobs_held_by_a_limit(engine: sa.Engine, models: Any) -> None:
    class Partner(Task):
        KIND = "stats_partner"
        global_concurrency = 1

    class Export(Task):
        KIND = "stats_export"
        Payload = Tenant
        key_concurrency = 1

        def limit_key(self) -> str | None:
            return self.payload["tenant"]

    queue = Queue(models, [Partner, Export])
    enqueue(engine, queue, Partner(), Partner(), Partner())
    enqueue(engine, queue, Export(tenant="a"), Export(tenant="a"), Export(tenant="a"), Export(tenant="b"))
    assert queue.stats(engine).limited == {}
    _claim(engine, models, [Partner], limit=1)
    _claim(engine, models, [Export], limit=1)  # tenant a's oldest
    stats = queue.stats(engine)
    assert stats.limited == {"stats_partner": 2, "stats_export": 2}
    assert stats.as_dict()["limited"] == {"stats_partner": 2, "stats_export": 2}


def test_a_window_widened_at_runtime_counts_the_starts_of_the_narrower_one(engine: sa.Engine, models: Any) -> None:
    class Call(Task):
        KIND = "widened_call"
        rate_limit = Rate(3, timedelta(seconds=1))

    queue = Queue(models, [Call])
    enqueue(engine, queue, *[Call() for _ in range(10)])
    start = models.Limits.Start
    first = _claim(engine, models, [Call])
    assert len(first) == 3
    with engine.begin() as conn:  # they started 2 s ago: past the 1 s window, well inside a minute
        conn.execute(sa.update(start).values(at=start.at - timedelta(seconds=2)))
    assert len(_claim(engine, models, [Call])) == 3  # the 1 s window has room again
    queue.set_limit(engine, "widened_call", rate_limit=Rate(5, timedelta(minutes=1)), actor="ops")
    assert _claim(engine, models, [Call]) == []  # 6 starts in the minute: no room under 5 per minute
    with engine.connect() as conn:
        assert limits.starts_within(models, conn, "widened_call", timedelta(minutes=1)) == 6


def test_a_key_limit_for_a_kind_without_limit_key_is_refused(engine: sa.Engine, models: Any,
                                                              async_engine: Any) -> None:
    import asyncio

    import pytest

    from venturi_sa import InvalidOption, VenturiError

    class Partner(Task):
        KIND = "keyless_partner"
        global_concurrency = 2

    class Export(Task):
        KIND = "keyed_export"
        Payload = Tenant

        def limit_key(self) -> str | None:
            return self.payload["tenant"]

    queue = Queue(models, [Partner, Export])
    refused = "kind 'keyless_partner' declares no limit_key"
    for key_limit in ({"key_concurrency": 1}, {"key_rate_limit": Rate(1, timedelta(minutes=1))}):
        with pytest.raises(InvalidOption, match=refused) as caught:
            queue.set_limit(engine, "keyless_partner", global_concurrency=1, **key_limit)  # type: ignore[arg-type]
        assert isinstance(caught.value, VenturiError)
        with pytest.raises(InvalidOption, match=refused):
            asyncio.run(queue.set_limit_async(async_engine, "keyless_partner", **key_limit))  # type: ignore[arg-type]
    assert [i.source for i in queue.limits(engine)] == ["declared"]  # nothing written
    queue.set_limit(engine, "keyless_partner", key_concurrency=None, actor="ops")  # "no key limit": harmless
    [info] = queue.set_limit(engine, "keyed_export", key_concurrency=2, actor="ops")
    assert (info.name, info.value, info.source) == ("key_concurrency", 2, "override")
    Queue(models, []).set_limit(engine, "keyless_partner", key_concurrency=1)  # no task code: taken as given
