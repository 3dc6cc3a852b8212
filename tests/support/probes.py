"""Helpers of the hardening regression tests: engines, workers in threads, events, probes.

Everything here goes through venturi's public API (``Queue``, ``Task``,
``Worker`` and its ``on_event`` hook, ``Queue.get_job``/``journal``) or raw
SQL on a separate connection (setup and fault injection).  No private
worker attribute is used.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from support.waiting import WAIT, wait_until
from support.workers import job_row, journal
from venturi_sa import Models, Worker


def worker_engine(pg_url: str, app: str, **kwargs: Any) -> sa.Engine:
    """An engine whose connections are tagged ``application_name = app`` (visible in pg_stat_activity)."""
    connect_args = {"options": "-c timezone=UTC", "application_name": app, **kwargs.pop("connect_args", {})}
    kwargs.setdefault("pool_size", 20)
    kwargs.setdefault("max_overflow", 40)
    return sa.create_engine(pg_url, connect_args=connect_args, **kwargs)








def outcomes(engine: sa.Engine, models: Models, job_id: str) -> list[tuple[int, str]]:
    return [(e.run_no, e.outcome) for e in journal(engine, models, job_id)]


def scalar(engine: sa.Engine, sql: str, **params: Any) -> Any:
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).scalar()


def rows(engine: sa.Engine, sql: str, **params: Any) -> list[sa.Row[Any]]:
    with engine.connect() as conn:
        return list(conn.execute(sa.text(sql), params).all())


def settled(engine: sa.Engine, models: Models, job_id: str, timeout: float = WAIT,
            statuses: Sequence[str] = ("completed", "dead")) -> sa.Row[Any]:
    """Wait until the job's status is one of ``statuses`` (terminal by default); return its row."""
    return wait_until(lambda: (r := job_row(engine, models, job_id)).status in statuses and r,
                      timeout, f"job {job_id} to reach {'/'.join(statuses)}")


def app_sessions(engine: sa.Engine, app: str, state: str | None = None) -> list[sa.Row[Any]]:
    """Backends of ``application_name = app`` (optionally in ``state``), from pg_stat_activity."""
    sql = ("SELECT pid, state, query FROM pg_stat_activity WHERE application_name = :a "
           "AND pid <> pg_backend_pid()")
    if state is not None:
        sql += " AND state = :s"
    return rows(engine, sql, a=app, s=state)


class Background:
    """``worker.run()`` in a thread; records what it raised."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._target, name="test-worker", daemon=True)

    def _target(self) -> None:
        try:
            self.worker.run()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.errors.append(exc)

    def start(self) -> Background:
        self.thread.start()
        return self

    def stop(self, now: bool = False, timeout: float = WAIT) -> None:
        self.worker.stop(now=now)
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "worker did not stop"


@contextmanager
def running(worker: Worker, now: bool = False) -> Iterator[Background]:
    """Run ``worker.run()`` in a thread; stop it (``now``) and wait for it on exit."""
    bg = Background(worker).start()
    try:
        yield bg
    finally:
        bg.stop(now=now)
    assert not bg.errors, f"worker.run() raised {bg.errors[0]!r}"


def side_table(engine: sa.Engine, prefix: str, name: str = "side") -> str:
    """Create ``<prefix>_<name>`` (no unique constraint) for handler writes."""
    table = f"{prefix}_{name}"
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE {table} (job_id text NOT NULL, run_no int NOT NULL, "
                             "note text, at timestamptz NOT NULL DEFAULT clock_timestamp())"))
    return table


def side_write(session: Session | sa.Connection, table: str, job_id: str, run_no: int, note: str = "") -> None:
    session.execute(sa.text(f"INSERT INTO {table} (job_id, run_no, note) VALUES (:j, :r, :n)"),
                    {"j": job_id, "r": run_no, "n": note})


def fail_once_trigger(engine: sa.Engine, prefix: str, fault: str, outcome: str = "completed") -> None:
    """Make the first journal INSERT of ``outcome`` fail once, transiently.

    ``fault`` is ``lock_timeout`` (SQLSTATE 55P03, what a ``lock_timeout``
    on a briefly locked table raises) or ``terminated`` (the writing backend
    is terminated, as by ``pg_terminate_backend``).  The once-only counter is
    a sequence, which a rolled-back transaction does not rewind.
    """
    action = {
        "lock_timeout": "RAISE EXCEPTION 'injected: canceling statement due to lock timeout' "
                        "USING ERRCODE = 'lock_not_available';",
        "terminated": "PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5);",
    }[fault]
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE SEQUENCE {prefix}_fault_seq"))
        conn.execute(sa.text(f"""
            CREATE FUNCTION {prefix}_fault() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.outcome = '{outcome}' AND nextval('{prefix}_fault_seq') = 1 THEN
                    {action}
                END IF;
                RETURN NEW;
            END $$"""))
        conn.execute(sa.text(f"CREATE TRIGGER {prefix}_fault BEFORE INSERT ON {prefix}_journal "
                             f"FOR EACH ROW EXECUTE FUNCTION {prefix}_fault()"))


def faults_fired(engine: sa.Engine, prefix: str) -> int:
    """How many journal INSERTs of the faulted outcome the trigger saw (0 before the first)."""
    return int(scalar(engine, f"SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {prefix}_fault_seq"))


def counter(values: Sequence[Any]) -> dict[Any, int]:
    out: dict[Any, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


@contextmanager
def jobs_locked(engine: sa.Engine, prefix: str) -> Iterator[None]:
    """``<prefix>_jobs`` locked ACCESS EXCLUSIVE by another connection until the block ends (a migration's lock)."""
    with engine.connect() as conn:
        conn.exec_driver_sql(f"LOCK TABLE {prefix}_jobs IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            conn.rollback()
