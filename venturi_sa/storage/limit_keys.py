"""The jobs' limit keys (``<prefix>_limit_keys``, v10): written with their jobs, read by the limited claim.

Nothing here commits; a key row goes with its job (``ON DELETE CASCADE``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.storage.params import Runner


def set_keys(models: Models, runner: Runner, rows: Sequence[tuple[str, str, str | None]]) -> None:
    """Give each ``(job_id, kind, key)`` its key (inserted or replaced); a key None deletes the job's row."""
    table: Any = models.Limits.Key
    gone = [job_id for job_id, _, key in rows if key is None]
    kept = [(job_id, kind, key) for job_id, kind, key in rows if key is not None]
    if gone:
        runner.execute(sa.delete(table).where(table.job_id.in_(gone)).execution_options(synchronize_session=False))
    if kept:
        stmt = postgresql.insert(table).values([{"job_id": j, "kind": k, "key": key} for j, k, key in kept])
        runner.execute(stmt.on_conflict_do_update(index_elements=["job_id"], set_={"key": stmt.excluded.key}))


def key_of(models: Models, runner: Runner, job_id: str) -> str | None:
    """The stored limit key of ``job_id`` (None: no key)."""
    table: Any = models.Limits.Key
    value: str | None = runner.execute(sa.select(table.key).where(table.job_id == job_id)).scalar()
    return value
