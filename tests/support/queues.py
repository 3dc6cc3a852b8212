"""Helpers for the core queue's integration tests: read rows, run workers, wait on events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from support.workers import journal
from venturi_sa import Models, Queue, Worker

WAIT = 20.0  # seconds any condition gets before a test fails








def outcomes(engine: sa.Engine, models: Models, job_id: str) -> list[str]:
    return [row.outcome for row in journal(engine, models, job_id)]


def count(engine: sa.Engine, table: sa.Table | str, where: str = "") -> int:
    name = table if isinstance(table, str) else table.name
    with engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM {name} {where}")).scalar_one())


def drain(queue: Queue, engine: sa.Engine, **options: Any) -> int:
    """``Worker(...).run_until_idle()`` with test-friendly defaults."""
    options.setdefault("concurrency", 4)
    options.setdefault("poll_interval", 0.2)
    return Worker(queue, engine, **options).run_until_idle()


def side_table(engine: sa.Engine, prefix: str) -> str:
    """Create ``<prefix>_side`` (no unique constraint): one row per handler write."""
    name = f"{prefix}_side"
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE {name} (job_id text NOT NULL, run_no int NOT NULL, "
                             "note text, at timestamptz NOT NULL DEFAULT clock_timestamp())"))
    return name


def side_write(session: Session, table: str, job_id: str, run_no: int, note: str = "") -> None:
    session.execute(sa.text(f"INSERT INTO {table} (job_id, run_no, note) VALUES (:j, :r, :n)"),
                    {"j": job_id, "r": run_no, "n": note})


def side_rows(engine: sa.Engine, table: str, job_ids: Sequence[str] | None = None) -> list[sa.Row[Any]]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT job_id, run_no, note FROM {table} ORDER BY at")).all()
    return [r for r in rows if job_ids is None or r.job_id in job_ids]
