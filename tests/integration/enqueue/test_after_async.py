"""The async twins take after= and if_parent_dead= with the sync semantics, on asyncpg."""

from __future__ import annotations

import asyncio
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from support.async_engines import async_engine_fixture  # noqa: F401 - the async_engine fixture

from venturi_sa import Queue, Task


class Node(Task):
    KIND = "node"


def test_async_enqueue_with_after_waits_and_reads_back(engine: sa.Engine, models: Any,
                                                       async_engine: AsyncEngine) -> None:
    queue = Queue(models, [Node])

    async def main() -> tuple[str, str, str]:
        async with AsyncSession(async_engine) as session, session.begin():
            parent = await queue.enqueue_async(session, Node())
            [child] = await queue.enqueue_many_async(session, [Node()], after=[parent], if_parent_dead="run")
            ids = await queue.enqueue_many_async(session, [Node()], after=[parent.id], ids_only=True)
            return parent.id, child.id, ids[0]

    parent, child, other = asyncio.run(main())
    assert [p.id for p in asyncio.run(queue.parents_async(async_engine, child))] == [parent]
    assert {d.id for d in asyncio.run(queue.dependents_async(async_engine, parent))} == {child, other}
    assert queue.explain(engine, other).codes[0] == "waiting_on_parents"
    queue.kill(engine, parent)
    assert queue.get_job(engine, other).status == "dead"
    assert queue.explain(engine, child).codes[0] != "waiting_on_parents"


RAN: list[str] = []


class Leaf(Task):
    KIND = "leaf"

    def run(self, ctx: Any) -> Any:
        RAN.append(ctx.job_id)
        return {"id": ctx.job_id}


class Join(Task):
    KIND = "join"

    async def run(self, ctx: Any) -> Any:
        parents = await ctx.parents_async()
        RAN.append("join")
        return [p.result["id"] for p in parents]


def test_a_worker_on_an_async_engine_releases_a_fan_in(engine: sa.Engine, models: Any,
                                                       async_engine: AsyncEngine) -> None:
    from sqlalchemy.orm import Session

    from venturi_sa import Worker
    RAN.clear()
    queue = Queue(models, [Leaf, Join])
    with Session(engine) as s, s.begin():
        leaves = queue.enqueue_many(s, [Leaf() for _ in range(6)])
        join = queue.enqueue(s, Join(), after=leaves)
        ids, join_id = [j.id for j in leaves], join.id
    Worker(queue, async_engine, concurrency=4, poll_interval=0.1).run_until_idle()
    assert RAN[-1] == "join" and RAN.count("join") == 1 and sorted(RAN[:-1]) == sorted(ids)
    assert queue.result(engine, join_id) == ids
