"""The second enqueuer of the dedup race, a process of its own (started once, then given work).

``python enqueuer_app.py`` reads lines ``URL PREFIX`` from stdin; for each
it enqueues one :class:`Refresh` (dedup key ``"one"``) in a session of its
own on ``URL`` (an ``AsyncSession`` for an async driver's URL), commits,
and prints ``ok <job id>`` (or ``error <reason>``) on one line.
"""

from __future__ import annotations

import asyncio
import sys

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa import JobContext, Queue, Task, make_models


class Refresh(Task):
    KIND = "refresh"

    def dedup_key(self) -> str:
        return "one"

    def run(self, ctx: JobContext) -> None:
        pass


def enqueue_one(url: str, prefix: str) -> str:
    queue = Queue(make_models(prefix), [Refresh])
    if not sa.make_url(url).get_dialect().is_async:
        engine = sa.create_engine(url)
        try:
            with Session(engine) as session, session.begin():
                return queue.enqueue(session, Refresh()).id
        finally:
            engine.dispose()

    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    async def main() -> str:
        async_engine = create_async_engine(url)
        try:
            async with AsyncSession(async_engine) as session, session.begin():
                return (await queue.enqueue_async(session, Refresh())).id
        finally:
            await async_engine.dispose()

    return asyncio.run(main())


def serve() -> None:
    for line in sys.stdin:
        url, prefix = line.split()
        try:
            reply = f"ok {enqueue_one(url, prefix)}"
        except Exception as exc:  # noqa: BLE001 - reported to the test
            reply = "error " + " ".join(f"{type(exc).__name__}: {exc}".split())
        print(reply, flush=True)


if __name__ == "__main__":
    serve()
