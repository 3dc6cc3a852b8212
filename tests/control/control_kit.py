"""Helpers for the runtime-control tests: side-table reads (worker processes: ``process_kit``)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from worker_kit import WAIT as WAIT


def side(engine: sa.Engine, prefix: str, table: str, job_id: str | None = None) -> list[sa.Row[Any]]:
    """Rows of ``<prefix>_<table>`` (``side``, ``started``, ``seen``), oldest first."""
    where = "" if job_id is None else " WHERE job_id = :j"
    with engine.connect() as conn:
        return list(conn.execute(sa.text(f"SELECT job_id, run_no, at FROM {prefix}_{table}{where} ORDER BY at"),
                                 {"j": job_id}))
