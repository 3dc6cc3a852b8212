"""Worker lifecycle hooks, ``around_run``, and ``WorkerApp`` given to ``venturi worker``."""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result
from support.hooks import drain
from support.workers import enqueue, journal

from venturi_sa import JobContext, Queue, Task, Worker, WorkerApp
from venturi_sa.cli import cli
from venturi_sa.errors import InvalidOption

span: contextvars.ContextVar[str | None] = contextvars.ContextVar("span", default=None)


class Sync(Task):
    KIND = "sync"

    def run(self, ctx: JobContext) -> Any:
        return {"span": span.get()}


class Async(Task):
    KIND = "async"

    async def run(self, ctx: JobContext) -> Any:
        await asyncio.sleep(0)
        return {"span": span.get()}


def test_hooks_run_in_order_and_around_run_wraps_each_handler(engine: sa.Engine, models: Any) -> None:
    calls: list[str] = []

    @contextmanager
    def around(ctx: JobContext) -> Iterator[None]:
        token = span.set(f"{ctx.kind}:{ctx.run_count}")
        calls.append(f"enter {ctx.kind}")
        try:
            yield
        finally:
            span.reset(token)
            calls.append(f"exit {ctx.kind}")

    queue = Queue(models, [Sync, Async])
    sync_id, async_id = enqueue(engine, queue, Sync(), Async())
    worker = Worker(queue, engine, concurrency=1, around_run=around,
                    on_start=[lambda w: calls.append("start 1"), lambda w: calls.append("start 2")],
                    on_stop=[lambda w: calls.append("stop 1"), lambda w: calls.append("stop 2")])
    assert worker.run_until_idle() == 2
    assert queue.result(engine, sync_id) == {"span": "sync:1"}
    assert queue.result(engine, async_id) == {"span": "async:1"}  # entered on the loop's task
    assert calls[:2] == ["start 1", "start 2"] and calls[-2:] == ["stop 2", "stop 1"]
    assert sorted(calls[2:-2]) == ["enter async", "enter sync", "exit async", "exit sync"]


def test_a_failing_around_run_is_the_runs_failure(engine: sa.Engine, models: Any) -> None:
    @contextmanager
    def broken(ctx: JobContext) -> Iterator[None]:
        raise RuntimeError("no app context today")
        yield

    queue = Queue(models, [Sync])
    [job_id] = enqueue(engine, queue, Sync())
    drain(queue, engine, around_run=broken)
    [entry] = journal(engine, models, job_id)
    assert entry.outcome == "retried" and "no app context today" in entry.note


def test_a_failing_on_start_stops_the_start(engine: sa.Engine, models: Any) -> None:
    def refuse(worker: Worker) -> None:
        raise RuntimeError("no config")

    with pytest.raises(RuntimeError, match="no config"):
        Worker(Queue(models, [Sync]), engine, on_start=refuse).run_until_idle()


def test_bad_hooks_are_refused_when_built(engine: sa.Engine, models: Any) -> None:
    with pytest.raises(InvalidOption, match="around_run takes a callable"):
        Worker(Queue(models, [Sync]), engine, around_run=[42])
    with pytest.raises(TypeError, match="takes a venturi_sa.Queue"):
        WorkerApp(engine)  # type: ignore[arg-type]


@pytest.fixture
def adoption_app(pg_url: str, prefix: str, models: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ADOPTION_PREFIX", prefix)
    monkeypatch.setenv("ADOPTION_URL", pg_url)
    monkeypatch.delenv("VENTURI_DSN", raising=False)
    monkeypatch.delitem(sys.modules, "adoption_app", raising=False)
    import adoption_app

    yield adoption_app
    sys.modules.pop("adoption_app", None)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env={"VENTURI_DSN": None}, prog_name="venturi")


@pytest.mark.parametrize("name", ["worker_app", "factory"])
def test_venturi_worker_takes_engine_and_hooks_from_the_app(engine: sa.Engine, adoption_app: Any,
                                                           name: str) -> None:
    task_type = adoption_app.queue.registry.get("stop_worker")
    [job_id] = enqueue(engine, adoption_app.queue, task_type())
    result = invoke("worker", f"adoption_app:{name}")  # no --dsn: the app builds its engine
    assert result.exit_code == 0, result.output
    assert adoption_app.events == ["engine built", "start", "ran in scope span:stop_worker", "stop"]
    assert adoption_app.queue.result(engine, job_id) == {"scope": "span:stop_worker"}


@pytest.mark.parametrize(("name", "words"), [
    ("flask_like", "is a FlaskLike, not a venturi_sa.Queue, a venturi_sa.WorkerApp or a function returning one "
                   "(a Flask app: add venturi_sa.contrib.flask.Venturi(app, db, queue) to it)"),
    ("needs_arguments", "is a function that needs arguments"),
])
def test_an_app_that_is_no_queue_is_one_line(adoption_app: Any, name: str, words: str) -> None:
    result = invoke("worker", f"adoption_app:{name}")
    assert result.exit_code == 1
    assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.output
    assert result.stderr.startswith("venturi: error: ") and words in result.stderr
