"""What every test tier needs around a worker: an event recorder, committed enqueue, row and journal reads,
and a stolen lease (what a zombie run looks like)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa import Models, Queue, Task, Worker
from venturi_sa.storage import claim as claims
from venturi_sa.storage import leases
from venturi_sa.storage.params import ClaimParams, RecoverParams

WAIT = 20.0  # seconds an awaited event gets before the test fails


def wait_until(predicate: Callable[[], Any], timeout: float = WAIT, what: str = "condition",
               every: float = 0.02) -> Any:
    """Poll ``predicate`` until it returns something truthy (and return that); fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


class Events:
    """An ``on_event`` hook that records events and lets a test wait for one.

    ``hooks[name]`` callables run inside the hook (on the worker's thread)
    for the event ``name``.
    """

    def __init__(self) -> None:
        self.seen: list[tuple[float, str, dict[str, Any]]] = []
        self.hooks: dict[str, Callable[[dict[str, Any]], None]] = {}
        self._cond = threading.Condition()

    def __call__(self, name: str, data: dict[str, Any]) -> None:
        with self._cond:
            self.seen.append((time.monotonic(), name, dict(data)))
            self._cond.notify_all()
        hook = self.hooks.get(name)
        if hook is not None:
            hook(data)

    def of(self, name: str, **match: Any) -> list[tuple[float, dict[str, Any]]]:
        with self._cond:
            return [(at, d) for at, n, d in self.seen
                    if n == name and all(d.get(k) == v for k, v in match.items())]

    def wait_for(self, name: str, timeout: float = WAIT, after: int = 0,
                 **match: Any) -> tuple[float, dict[str, Any]]:
        """The first event ``name`` (from index ``after``) whose data contains ``match``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for at, seen_name, data in self.seen[after:]:
                    if seen_name == name and all(data.get(k) == v for k, v in match.items()):
                        return at, data
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {name!r} event matching {match} within {timeout}s")
                self._cond.wait(left)

    def wait_count(self, name: str, n: int, timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while sum(1 for _, seen_name, _ in self.seen if seen_name == name) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"fewer than {n} {name!r} events within {timeout}s")
                self._cond.wait(left)

    def mark(self) -> int:
        with self._cond:
            return len(self.seen)


def enqueue(engine: sa.Engine, queue: Queue, *tasks: Task, **options: Any) -> list[str]:
    """Enqueue ``tasks`` in one committed transaction; return the job ids in order."""
    with Session(engine) as session, session.begin():
        return [job.id for job in queue.enqueue_many(session, list(tasks), **options)]


def job_row(engine: sa.Engine, models: Models, job_id: str) -> sa.Row[Any]:
    with engine.connect() as conn:
        return conn.execute(sa.select(models.jobs_table).where(models.jobs_table.c.id == job_id)).one()


def journal(engine: sa.Engine, models: Models, job_id: str) -> list[sa.Row[Any]]:
    """The job's journal rows in order."""
    t = models.journal_table
    with engine.connect() as conn:
        return list(conn.execute(sa.select(t).where(t.c.job_id == job_id).order_by(t.c.id)))


def steal(engine: sa.Engine, models: Models, job_id: str, kind: str, thief: str = "thief:1") -> None:
    """What a lost lease looks like: the lease expires, another worker recovers the job and reclaims it.

    Call it from the running handler: its run is then a zombie whose outcome
    (and session work) the fence must discard.
    """
    with Session(engine) as session, session.begin():
        session.execute(sa.update(models.Job).where(models.Job.id == job_id)
                        .values(claim_expires_at=sa.func.now() - timedelta(seconds=1))
                        .execution_options(synchronize_session=False))
        recovered = leases.recover(models, session, RecoverParams(max_failures={kind: 10}))
        assert [r.id for r in recovered] == [job_id]
    with Session(engine) as session, session.begin():
        [job] = claims.claim(models, session, ClaimParams(
            worker_id=thief, kinds=[kind], limit=1, leases={}, default_lease=timedelta(minutes=5)))
        assert job.id == job_id and job.run_count == 2


@contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    """Run ``worker.run()`` in a thread; stop it and wait for it on exit."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            worker.run()
        except BaseException as exc:  # noqa: BLE001 - reported to the test below
            errors.append(exc)

    thread = threading.Thread(target=target, name="test-worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(WAIT)
        assert not thread.is_alive(), "worker did not stop"
    assert not errors, f"worker.run() raised {errors[0]!r}"
