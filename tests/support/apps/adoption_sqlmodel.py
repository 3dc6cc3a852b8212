"""An SQLModel application for ``venturi worker adoption_sqlmodel:queue`` (a bare Queue, no WorkerApp).

Its handlers use ``ctx.session.exec(...)`` / ``ctx.session_async.exec(...)``,
which only ``sqlmodel.Session`` / sqlmodel's ``AsyncSession`` have: the
queue's models are on ``SQLModel.metadata``, so the queue's ``session_class``
and ``async_session_class`` are sqlmodel's without being told.
``ADOPTION_PREFIX`` is set by the test before import; with ``ADOPTION_STOP``
the handler ends its worker process with SIGTERM (a graceful stop: the run
finishes and its outcome is recorded).
"""

from __future__ import annotations

import os
import signal
from typing import Any

from sqlmodel import Field, Session, SQLModel, select
from sqlmodel.ext.asyncio.session import AsyncSession

from venturi_sa import JobContext, Queue, make_models

PREFIX = os.environ.get("ADOPTION_PREFIX", "adoption_sqlmodel")


class Hero(SQLModel, table=True):
    __tablename__ = f"{PREFIX}_heroes"
    id: int | None = Field(default=None, primary_key=True)
    name: str


queue = Queue(make_models(PREFIX, SQLModel))


@queue.task("count_heroes")
def count_heroes(payload: Any, ctx: JobContext) -> Any:
    names = ctx.session.exec(select(Hero.name).order_by(Hero.name)).all()  # sqlmodel.Session only
    ctx.session.add(Hero(name=f"hero {len(names) + 1}"))
    if os.environ.get("ADOPTION_STOP"):
        os.kill(os.getpid(), signal.SIGTERM)
    return {"names": list(names), "sqlmodel_session": isinstance(ctx.session, Session)}


@queue.task("count_heroes_async")
async def count_heroes_async(payload: Any, ctx: JobContext) -> Any:
    session = ctx.session_async
    try:
        names = (await session.exec(select(Hero.name).order_by(Hero.name))).all()  # sqlmodel's AsyncSession only
        session.add(Hero(name=f"hero {len(names) + 1}"))
        return {"names": list(names), "sqlmodel_session": isinstance(session, AsyncSession)}
    finally:
        if os.environ.get("ADOPTION_STOP"):  # stop after this run, whatever it did
            os.kill(os.getpid(), signal.SIGTERM)
