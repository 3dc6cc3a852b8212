"""Helpers of the adoption tests: a worker in a thread, draining, the application's own table."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from venturi_sa import Queue, Worker


def drain(queue: Queue, engine: sa.Engine, **options: Any) -> int:
    """``Worker(...).run_until_idle()`` with test-friendly defaults."""
    options.setdefault("concurrency", 2)
    options.setdefault("poll_interval", 0.2)
    return Worker(queue, engine, **options).run_until_idle()


def exports_table(engine: sa.Engine, prefix: str) -> sa.Table:
    """The application's own "export in progress" table, created for this test's prefix."""
    table = sa.Table(f"{prefix}_exports", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True),
                     sa.Column("state", sa.Text, nullable=False))
    table.create(engine)
    return table


def states(engine: sa.Engine, table: sa.Table) -> dict[int, str]:
    with engine.connect() as conn:
        return {row.id: row.state for row in conn.execute(sa.select(table))}
