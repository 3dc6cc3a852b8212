"""Conformance of enqueue, per stack: {``Session``, ``AsyncSession``} × {psycopg2, psycopg 3, asyncpg}.

The application's session (``support.stacks.AppSession``: a ``Session``, or an
``AsyncSession`` with ``enqueue_async``) is where jobs are added: commit
publishes them (with an enqueue's time limit) and sends the queue's ``NOTIFY``, rollback leaves nothing,
and two processes enqueueing one dedup key end with one job.  The two
combinations no driver offers are refused when built.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from enqueuer_app import Refresh
from sqlalchemy.orm import Session
from support.drivers import UNSUPPORTED, Stack, driver_url
from support.paths import APPS
from support.queues import count, outcomes
from support.stacks import AppSession, app_engine_fixture, engine_fixture, refused_without_async_api, stack_fixture  # noqa: F401 - fixtures
from support.waiting import WAIT, wait_until

from venturi_sa import Queue, Task, make_models
from venturi_sa.storage import drivers

ENQUEUER = APPS / "enqueuer_app.py"


class Plain(Task):
    KIND = "plain"


def test_commit_publishes_and_notifies_rollback_discards(app_engine: Any, engine: sa.Engine, models: Any) -> None:
    jobs = Queue(models, [Plain])
    listening = drivers.listen(engine, [models.names.channel])
    try:
        session = AppSession(app_engine)
        try:
            dropped = session.enqueue(jobs, Plain())
            session.rollback()
            kept = session.enqueue(jobs, Plain())
            assert count(engine, models.jobs_table) == 0  # not before the commit
            session.commit()
        finally:
            session.close()
        heard = listening.wait(WAIT)
        assert [n.payload for n in heard] == ["plain"]  # the commit's NOTIFY, and none of the rollback's
        assert listening.wait(0.0) == []
    finally:
        listening.close()
    with engine.connect() as conn:
        ids = conn.execute(sa.select(models.Job.id, models.Job.status)).all()
    assert [tuple(r) for r in ids] == [(kept, "pending")] and dropped != kept


def test_ids_only_commit_publishes_and_notifies_rollback_discards(app_engine: Any, engine: sa.Engine,
                                                                  models: Any) -> None:
    jobs = Queue(models, [Plain, Refresh])
    listening = drivers.listen(engine, [models.names.channel])
    try:
        session = AppSession(app_engine)
        try:
            session.enqueue_ids(jobs, [Plain(), Plain()])
            session.rollback()
            kept = session.enqueue_ids(jobs, [Plain(), Plain(), Refresh(), Refresh()])  # dedup: ordinary path
            assert count(engine, models.jobs_table) == 0  # not before the commit
            session.commit()
        finally:
            session.close()
        heard = listening.wait(WAIT)
        heard += listening.wait(0.5)
        assert sorted(n.payload for n in heard) == ["plain", "refresh"]  # the commit's, none of the rollback's
    finally:
        listening.close()
    with engine.connect() as conn:
        stored = set(conn.execute(sa.select(models.Job.id)).scalars())
    assert kept[2] == kept[3] and stored == set(kept)


def test_an_enqueue_time_limit_commits_with_its_job(app_engine: Any, engine: sa.Engine, models: Any) -> None:
    jobs = Queue(models, [Plain])
    session = AppSession(app_engine)
    try:
        job_id = session.enqueue(jobs, Plain(), timeout=timedelta(seconds=90))
        session.commit()
    finally:
        session.close()
    assert jobs.get_job(engine, job_id).timeout == timedelta(seconds=90)


def advisory_waiters(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.scalar(sa.text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                       "AND NOT granted")) or 0)


class Enqueuer:
    """``enqueuer_app.py`` in a process of its own, started once for the module; one request at a time."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, str(ENQUEUER)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, bufsize=1)
        self.replies: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="test-enqueuer-replies", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.replies.put(line.strip())
        self.replies.put("error the enqueuer process exited")

    def request(self, url: str, prefix: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{url} {prefix}\n")
        self.process.stdin.flush()

    def reply(self, timeout: float = WAIT) -> str | None:
        try:
            return self.replies.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(WAIT)
        assert self.process.stdout is not None
        self.process.stdout.close()


@pytest.fixture(scope="module")
def enqueuer() -> Iterator[Enqueuer]:
    process = Enqueuer()
    yield process
    process.close()


def test_dedup_race_between_two_processes(app_engine: Any, engine: sa.Engine, models: Any, prefix: str,
                                          enqueuer: Enqueuer) -> None:
    """The second process waits on the first's advisory lock, then merges into its committed job."""
    jobs = Queue(models, [Refresh])
    first = AppSession(app_engine)
    try:
        kept = first.enqueue(jobs, Refresh())
        enqueuer.request(app_engine.url.render_as_string(hide_password=False), prefix)
        wait_until(lambda: advisory_waiters(engine) or not enqueuer.replies.empty(), what="the second enqueuer")
        assert enqueuer.replies.empty(), enqueuer.reply()  # it waits on the dedup lock
        first.commit()
    finally:
        first.close()
    assert enqueuer.reply() == f"ok {kept}"
    assert count(engine, models.jobs_table) == 1
    assert outcomes(engine, models, kept) == ["merged"]


@pytest.mark.parametrize("unsupported", UNSUPPORTED, ids=lambda s: s.id)
def test_a_stack_no_driver_offers_is_refused_when_built(unsupported: Stack, pg_url: str) -> None:
    url = driver_url(pg_url, unsupported.driver)
    if refused_without_async_api(unsupported, url):
        return
    jobs = Queue(make_models("refused"), [Plain])
    with Session(sa.create_engine(url)) as session:  # asyncpg has no sync API: enqueue refuses the session
        with pytest.raises(TypeError, match=r"Session on the async driver 'asyncpg'.*enqueue_async"):
            jobs.enqueue(session, Plain())
        with pytest.raises(TypeError, match=r"enqueue_many_async"):
            jobs.enqueue_many(session, [Plain()])
        assert not session.new
