"""An application for ``venturi worker adoption_app:worker_app``: the engine and hooks come from the app.

``ADOPTION_PREFIX`` and ``ADOPTION_URL`` are set by the test before import.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from venturi_sa import JobContext, Queue, Worker, WorkerApp, make_models

events: list[str] = []
scope: contextvars.ContextVar[str] = contextvars.ContextVar("adoption_scope", default="none")
queue = Queue(make_models(os.environ.get("ADOPTION_PREFIX", "adoption_app")))


@queue.task("stop_worker")
def stop_worker(payload: Any, ctx: JobContext) -> Any:
    events.append(f"ran in scope {scope.get()}")
    workers[0].stop()
    return {"scope": scope.get()}


workers: list[Worker] = []


def started(worker: Worker) -> None:
    workers.append(worker)
    events.append("start")


@contextmanager
def traced(ctx: JobContext) -> Iterator[None]:
    token = scope.set(f"span:{ctx.kind}")
    try:
        yield
    finally:
        scope.reset(token)


def make_engine() -> sa.Engine:
    events.append("engine built")
    return sa.create_engine(os.environ["ADOPTION_URL"])


worker_app = WorkerApp(queue, engine=make_engine, on_start=started, on_stop=lambda w: events.append("stop"),
                       around_run=traced, options={"poll_interval": 0.1})


def factory() -> WorkerApp:
    return worker_app


def needs_arguments(config: str) -> WorkerApp:
    return worker_app


class FlaskLike:
    """Looks like a Flask app without the venturi extension."""

    extensions: dict[str, Any] = {}
    def __call__(self, environ: Any, start_response: Any) -> Any:
        return None


flask_like = FlaskLike()
