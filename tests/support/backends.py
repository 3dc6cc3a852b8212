"""One harness per Backend implementation, so the worker-verb and durable-verb tests run unchanged on each.

A kit puts jobs in (``seed``, with the factories' traits), runs a verb in a
transaction of the implementation (``begin``), reads rows back, and stands
in for what another actor does (an operator's release or cancel request,
a pause, a row lock held by another transaction).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy.orm import Session

from support.factories import db_now, factories_for
from venturi_sa import Models
from venturi_sa.storage import pauses, signals
from venturi_sa.storage.backend import SqlAlchemyBackend
from venturi_sa.storage.durable_backend import WorkerBackend
from venturi_sa.storage.memory import MemoryBackend

T = TypeVar("T")
TRAITS = {"claimed", "expired", "scheduled", "completed", "dead"}


class Kit(Protocol):
    backend: WorkerBackend

    def seed(self, *rows: dict[str, Any]) -> list[str]:
        """Insert jobs (factory traits and columns as keys; ``visible_in``: a delay from now), committed."""

    def begin(self, fn: Callable[[Any], T], *, no_wait: bool = False) -> T:
        """``fn(tx)`` in a committed transaction (``no_wait``: fail rather than wait on a row lock)."""

    def row(self, job_id: str) -> Any:
        """The job's row (``status``, ``claimed_by``, ``claim_expires_at``, ``failure_count``, ``carry``, ...)."""

    def journal(self, job_id: str) -> list[tuple[int, str]]:
        """``(run_no, outcome)`` of the job's journal, oldest first."""

    def notes(self, job_id: str) -> list[str | None]:
        """The notes of the job's journal, oldest first."""

    def owed(self, job_id: str) -> int:
        """How many ``on_dead`` calls the job is owed."""

    def release(self, job_id: str) -> None:
        """An operator's release: the claim is over, the job pending again."""

    def request_cancel(self, job_id: str, actor: str, note: str | None = None) -> None:
        """A stored cancel request for a claimed job (as ``Queue.cancel`` stores for a live claim)."""

    def pause(self, kind: str) -> None:
        """Pause a kind (or pattern) until further notice."""

    def locked(self, job_id: str) -> AbstractContextManager[None]:
        """Another transaction holds the job's row lock while this is open."""

    def now(self) -> datetime:
        """The store's clock."""

    def signal(self, job_id: str, name: str, payload: Any = None) -> str:
        """Send a signal as ``queue.signal`` does, committed; ``"woke"``, ``"stored"``, ``"timed out"``, ..."""

    def link(self, job_id: str, parents: list[str]) -> None:
        """Make ``parents`` the job's parents (``after=``), in that order."""


class SqlKit:
    def __init__(self, engine: sa.Engine, models: Models) -> None:
        self.engine, self.models = engine, models
        self.backend: WorkerBackend = SqlAlchemyBackend(models)

    def seed(self, *rows: dict[str, Any]) -> list[str]:
        with Session(self.engine) as session:
            job_factory, _ = factories_for(self.models, session)
            ids = []
            for spec in rows:
                spec = dict(spec)
                if "visible_in" in spec:
                    spec["visible_at"] = db_now(spec.pop("visible_in"))
                ids.append(job_factory(**spec).id)
            session.commit()
        return ids

    def begin(self, fn: Callable[[Any], T], *, no_wait: bool = False) -> T:
        with self.engine.begin() as conn:
            if no_wait:
                conn.execute(sa.text("SET LOCAL lock_timeout = '2s'"))
            return fn(conn)

    def row(self, job_id: str) -> Any:
        jobs = self.models.jobs_table
        with self.engine.connect() as conn:
            return conn.execute(sa.select(jobs).where(jobs.c.id == job_id)).one()

    def _journal(self, job_id: str) -> list[Any]:
        j = self.models.journal_table.c
        with self.engine.connect() as conn:
            return list(conn.execute(sa.select(j.run_no, j.outcome, j.note).where(j.job_id == job_id).order_by(j.id)))

    def journal(self, job_id: str) -> list[tuple[int, str]]:
        return [(r.run_no, r.outcome) for r in self._journal(job_id)]

    def notes(self, job_id: str) -> list[str | None]:
        return [r.note for r in self._journal(job_id)]

    def owed(self, job_id: str) -> int:
        owed = self.models.on_dead_table.c
        with self.engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).where(owed.job_id == job_id)).scalar_one())

    def release(self, job_id: str) -> None:
        jobs = self.models.jobs_table
        with self.engine.begin() as conn:
            conn.execute(sa.update(jobs).where(jobs.c.id == job_id)
                         .values(status="pending", claimed_by=None, claim_expires_at=None))

    def request_cancel(self, job_id: str, actor: str, note: str | None = None) -> None:
        jobs = self.models.jobs_table  # the stored request itself (Queue.cancel ends an expired claim at once)
        with self.engine.begin() as conn:
            run_no = conn.execute(sa.select(jobs.c.run_count).where(jobs.c.id == job_id)).scalar_one()
            conn.execute(sa.insert(self.models.cancels_table).values(job_id=job_id, run_no=run_no, actor=actor,
                                                                     note=note, created_at=sa.func.now()))

    def pause(self, kind: str) -> None:
        with self.engine.begin() as conn:
            pauses.pause(self.models, conn, pauses.PauseParams(kind=kind, actor="ops"))

    @contextmanager
    def locked(self, job_id: str) -> Iterator[None]:
        with Session(self.engine) as holder, holder.begin():
            holder.execute(sa.select(self.models.Job.id).where(self.models.Job.id == job_id).with_for_update())
            yield

    def now(self) -> datetime:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(sa.func.now())).scalar_one()  # type: ignore[no-any-return]

    def signal(self, job_id: str, name: str, payload: Any = None) -> str:
        with self.engine.begin() as conn:
            return signals.send(self.models, conn, job_id, name, payload, signals.SignalCaps(100, 1 << 20)).result.value

    def link(self, job_id: str, parents: list[str]) -> None:
        with self.engine.begin() as conn:
            conn.execute(sa.insert(self.models.workflow.parents_table), [
                {"job_id": job_id, "position": n, "parent_id": parent, "policy": "run"}
                for n, parent in enumerate(parents)])


class MemoryKit:
    def __init__(self) -> None:
        self.store = MemoryBackend()
        self.backend: WorkerBackend = self.store

    def seed(self, *rows: dict[str, Any]) -> list[str]:
        return [self.store.add(**self._columns(dict(spec))) for spec in rows]

    def _columns(self, spec: dict[str, Any]) -> dict[str, Any]:
        """The factories' traits, as columns (see tests/factories.py)."""
        now, traits = self.store.clock(), {t for t in TRAITS if spec.pop(t, False)}
        columns: dict[str, Any] = {}
        if "scheduled" in traits:
            columns["visible_at"] = now + timedelta(hours=1)
        if traits & {"claimed", "expired"}:
            lease = timedelta(seconds=60) if "claimed" in traits else -timedelta(seconds=60)
            columns.update(status="claimed", claimed_by="factory-host:1", claim_expires_at=now + lease, run_count=1)
        if traits & {"completed", "dead"}:
            columns.update(status="completed" if "completed" in traits else "dead", run_count=1, finished_at=now)
        if "visible_in" in spec:
            columns["visible_at"] = now + spec.pop("visible_in")
        return {**columns, **spec}

    def begin(self, fn: Callable[[Any], T], *, no_wait: bool = False) -> T:
        return self.store.begin(fn)

    def row(self, job_id: str) -> Any:
        return self.store.jobs[job_id]

    def journal(self, job_id: str) -> list[tuple[int, str]]:
        return self.store.journal_of(job_id)

    def notes(self, job_id: str) -> list[str | None]:
        return [r.note for r in self.store.journal if r.job_id == job_id]

    def owed(self, job_id: str) -> int:
        return sum(1 for o in self.store.owed if o.job_id == job_id)

    def release(self, job_id: str) -> None:
        job = self.store.jobs[job_id]
        job.status, job.claimed_by, job.claim_expires_at = "pending", None, None

    def request_cancel(self, job_id: str, actor: str, note: str | None = None) -> None:
        self.store.request_cancel(job_id, actor, note)

    def pause(self, kind: str) -> None:
        self.store.pause(kind)

    def locked(self, job_id: str) -> AbstractContextManager[None]:
        return self.store.locked(job_id)

    def now(self) -> datetime:
        return self.store.clock()

    def signal(self, job_id: str, name: str, payload: Any = None) -> str:
        return self.store.signal(job_id, name, payload).value

    def link(self, job_id: str, parents: list[str]) -> None:
        self.store.link(job_id, parents)
