"""Helpers of the archive tests: where each job is, old archive days made on purpose, archived rows written directly."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any

import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.orm import Session

from venturi_sa import JobContext, Models, Task
from venturi_sa.storage import archive


class Terms(Schema):
    a = fields.Integer(required=True)
    b = fields.Integer(required=True)


class Add(Task):
    """The archive tests' task: its result (the sum) shows which run it was."""

    KIND = "add"
    Payload = Terms

    def run(self, ctx: JobContext) -> Any:
        return {"sum": self.payload["a"] + self.payload["b"]}


def places(engine: sa.Engine, models: Models) -> tuple[set[str], list[str], dict[str, int]]:
    """``(live ids, archived ids with repeats, live journal rows per job)`` read in one snapshot."""
    with engine.connect() as conn, conn.begin():
        conn.execute(sa.text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))
        live = set(conn.execute(sa.select(models.jobs_table.c.id)).scalars())
        archived = list(conn.execute(sa.select(models.archive_table.c.id)).scalars())
        t = models.journal_table
        entries = {r[0]: r[1] for r in conn.execute(sa.select(t.c.job_id, sa.func.count()).group_by(t.c.job_id))}
    return live, archived, entries


def attach_days(engine: sa.Engine, models: Models, first: date, days: int) -> list[str]:
    """Attach the archive's partitions of ``days`` days from ``first`` (past days, for retention tests)."""
    with Session(engine) as session, session.begin():
        return archive.ensure_partitions(models, session, ahead=days - 1, start=first)


def partition_names(engine: sa.Engine, models: Models) -> set[str]:
    """The archive's partitions, read from ``pg_inherits`` and ``pg_class``."""
    with engine.connect() as conn:
        return set(conn.execute(sa.text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass(:parent)"), {"parent": models.names.archive}).scalars())


def relation_exists(engine: sa.Engine, name: str) -> bool:
    with engine.connect() as conn:
        return bool(conn.execute(sa.text("SELECT to_regclass(:n) IS NOT NULL"), {"n": name}).scalar_one())


def backdate(engine: sa.Engine, models: Models, job_ids: list[str], interval: str) -> None:
    """Make the terminal jobs ``job_ids`` finished ``interval`` earlier than they did."""
    job = models.jobs_table
    with engine.begin() as conn:
        conn.execute(sa.update(job).where(job.c.id.in_(job_ids))
                     .values(finished_at=job.c.finished_at - sa.text(f"interval '{interval}'")))


def archived_row(engine: sa.Engine, models: Models, job_id: str) -> Any:
    a = models.archive_table
    with engine.connect() as conn:
        return conn.execute(sa.select(a).where(a.c.id == job_id)).one()


def noon(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, 12, tzinfo=timezone.utc)


def put(engine: sa.Engine, models: Any, job_id: str, moved: datetime, finished: datetime,
        status: str = "completed", kind: str = "noop") -> None:
    """An archived job as the archiver writes it, moved and finished when the test says."""
    job = {"id": job_id, "kind": kind, "payload": {}, "priority": 1, "status": status,
           "created_at": (finished - timedelta(minutes=1)).isoformat(),
           "visible_at": (finished - timedelta(minutes=1)).isoformat(), "claim_expires_at": None,
           "claimed_by": None, "finished_at": finished.isoformat(), "run_count": 1, "failure_count": 0,
           "carry": None, "dedup_key": None}
    with engine.begin() as conn:
        conn.execute(sa.insert(models.archive_table).values(
            id=job_id, kind=kind, status=status, created_at=finished - timedelta(minutes=1), finished_at=finished,
            moved_at=moved, job=job, journal=[]))
