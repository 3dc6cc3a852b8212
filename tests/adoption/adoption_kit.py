"""Helpers of the adoption tests: a worker in a thread, draining, the application's own table."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from worker_kit import WAIT as WAIT
from worker_kit import Events as Events
from worker_kit import enqueue as enqueue
from worker_kit import job_row as job_row
from worker_kit import journal as journal

from venturi_sa import Queue, Worker


def drain(queue: Queue, engine: sa.Engine, **options: Any) -> int:
    """``Worker(...).run_until_idle()`` with test-friendly defaults."""
    options.setdefault("concurrency", 2)
    options.setdefault("poll_interval", 0.2)
    return Worker(queue, engine, **options).run_until_idle()


@contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    """``worker.run()`` in a thread; stopped and joined on exit (its error, if any, fails the test)."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            worker.run()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=target, name="adoption-worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(WAIT)
        assert not thread.is_alive(), "worker did not stop"
    assert not errors, f"worker.run() raised {errors[0]!r}"


def exports_table(engine: sa.Engine, prefix: str) -> sa.Table:
    """The application's own "export in progress" table, created for this test's prefix."""
    table = sa.Table(f"{prefix}_exports", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True),
                     sa.Column("state", sa.Text, nullable=False))
    table.create(engine)
    return table


def states(engine: sa.Engine, table: sa.Table) -> dict[int, str]:
    with engine.connect() as conn:
        return {row.id: row.state for row in conn.execute(sa.select(table))}
