"""``WorkerApp``: what ``venturi worker APP`` runs, so an application configures its database once.

APP names a :class:`~venturi_sa.Queue`, a :class:`WorkerApp`, an object
carrying one (a Flask app with the ``venturi_sa.contrib.flask`` extension),
or a function of no arguments returning any of those (an application
factory).  A ``WorkerApp`` supplies the engine (or a function building it,
called in the worker process) and the worker's hooks and options, so
``venturi worker app:worker_app`` needs no ``--dsn``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from venturi_sa.errors import InvalidOption
from venturi_sa.queue import Queue
from venturi_sa.run_hooks import RunHooks
from venturi_sa.worker.worker_options import WorkerOptions

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from venturi_sa.worker.worker import Worker



@dataclass
class WorkerApp:
    """A queue with the engine, hooks and options its workers use.

    ``engine`` is an Engine (or AsyncEngine), or a function of no
    arguments returning one (called when a worker is built, in its
    process); ``on_start``/``on_stop``/``around_run`` are as for
    :class:`~venturi_sa.Worker`; ``options`` are more ``Worker`` keyword
    arguments (``concurrency``, ``session_class``...), which the command
    line's options override.
    """

    queue: Queue
    engine: Any = None
    on_start: Any = None
    on_stop: Any = None
    around_run: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.queue, Queue):
            raise TypeError(f"WorkerApp(queue=...) takes a venturi_sa.Queue, got {type(self.queue).__name__}")
        RunHooks.of(self.on_start, self.on_stop, self.around_run)  # InvalidOption now, not at start
        if self.engine is not None and not callable(self.engine) and not _is_engine(self.engine):
            raise InvalidOption(f"WorkerApp(engine=...) takes an Engine or a function returning one, "
                                f"got {type(self.engine).__name__}")

    def get_engine(self) -> sa.Engine | AsyncEngine | None:
        """The engine (calling ``engine`` if it is a function); None if the app gives none."""
        engine: Any = self.engine() if callable(self.engine) and not _is_engine(self.engine) else self.engine
        if engine is not None and not _is_engine(engine):
            raise InvalidOption(f"WorkerApp's engine function returned a {type(engine).__name__}, not an Engine")
        return engine  # type: ignore[no-any-return]

    def worker(self, engine: sa.Engine | AsyncEngine | None = None, **options: Any) -> Worker:
        """A :class:`~venturi_sa.Worker` on ``engine`` (default: the app's) with the app's hooks and options."""
        from venturi_sa.worker.worker import Worker

        chosen = engine if engine is not None else self.get_engine()
        if chosen is None:
            raise InvalidOption("this WorkerApp has no engine: pass one (or --dsn on the command line)")
        given = {**self.options, **options}
        engines = {name: given.pop(name) for name in ("sync_engine", "async_engine") if name in given}
        worker_options = WorkerOptions(on_start=self.on_start, on_stop=self.on_stop, around_run=self.around_run,
                                       **given)
        return Worker(self.queue, chosen, worker_options, **engines)


def _is_engine(value: object) -> bool:
    from venturi_sa.binds import is_async_engine

    return isinstance(value, sa.Engine) or is_async_engine(value)


def as_worker_app(target: object, what: str) -> WorkerApp:
    """``target`` (see the module docstring) as a WorkerApp; ``TypeError`` naming ``what`` otherwise."""
    for _ in range(2):  # a factory's result is resolved once more, never called again
        if isinstance(target, WorkerApp):
            return target
        if isinstance(target, Queue):
            return WorkerApp(target)
        carried = _carried(target)
        if carried is not None:
            return carried
        if not (inspect.isfunction(target) or inspect.ismethod(target)):
            break
        try:
            inspect.signature(target).bind()
        except TypeError:
            raise TypeError(f"{what} is a function that needs arguments; venturi calls it with none") from None
        target = target()
    hint = ""
    if isinstance(getattr(target, "extensions", None), dict):
        hint = " (a Flask app: add venturi_sa.contrib.flask.Venturi(app, db, queue) to it)"
    raise TypeError(f"{what} is a {type(target).__name__}, not a venturi_sa.Queue, a venturi_sa.WorkerApp "
                    f"or a function returning one{hint}")


def _carried(target: object) -> WorkerApp | None:
    """The WorkerApp of an object carrying one (a Flask app's ``extensions["venturi"]``)."""
    extensions = getattr(target, "extensions", None)
    extension = extensions.get("venturi") if isinstance(extensions, dict) else None
    make = getattr(extension, "worker_app", None)
    if not callable(make):
        return None
    app = make(target)
    return app if isinstance(app, WorkerApp) else None
