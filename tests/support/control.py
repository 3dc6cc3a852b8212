"""Helpers for the runtime-control tests: a watched worker, do-nothing task types, side-table reads
(worker processes: ``support.processes``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from support.waiting import Events
from support.workers import running
from venturi_sa import JobContext, Queue, Task, Worker


@contextmanager
def watched(queue: Queue, engine: sa.Engine, concurrency: int = 1, **options: Any) -> Iterator[Events]:
    """A worker on ``queue`` running for the block (polling every 0.2 s unless told otherwise); its events."""
    events = Events()
    options.setdefault("poll_interval", 0.2)
    with running(Worker(queue, engine, concurrency=concurrency, on_event=events, **options)):
        yield events


def _nothing(self: Task, ctx: JobContext) -> None:
    pass


def noop_tasks(*kinds: str) -> list[type[Task]]:
    """Task types of ``kinds`` whose handlers do nothing."""
    return [type(f"Noop{i}", (Task,), {"KIND": kind, "run": _nothing}) for i, kind in enumerate(kinds)]


def side(engine: sa.Engine, prefix: str, table: str, job_id: str | None = None) -> list[sa.Row[Any]]:
    """Rows of ``<prefix>_<table>`` (``side``, ``started``, ``seen``), oldest first."""
    where = "" if job_id is None else " WHERE job_id = :j"
    with engine.connect() as conn:
        return list(conn.execute(sa.text(f"SELECT job_id, run_no, at FROM {prefix}_{table}{where} ORDER BY at"),
                                 {"j": job_id}))
