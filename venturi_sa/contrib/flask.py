"""Flask integration: a :class:`Venturi` extension binding a Queue to Flask-SQLAlchemy's ``db``.

Install with ``pip install 'venturi[flask]'``.  The extension

* enqueues in the request's own transaction: ``venturi.enqueue(task)`` adds
  the job to ``db.session`` (commit publishes it, rollback discards it, and a
  request that raises is rolled back at its teardown);
* gives workers the application's engine (``db.engine``: the database URL is
  configured once, in ``SQLALCHEMY_DATABASE_URI``) and runs every job, and
  every outcome hook, inside ``app.app_context()`` (``around_run``);
* adds ``flask venturi worker`` (the options of ``venturi worker``) and
  ``flask venturi <command>`` for every ``venturi`` command that acts on a
  queue's database (``stats``, ``jobs ...`` including ``jobs why``,
  ``schedules``, ``pause``/``resume``/``pauses``, ``web``, ``cleanup``,
  ``archive``, ``migrate``), which take the engine and the queue prefix from the app as
  ``venturi <command> --app`` does (so they have no ``--app``, ``--dsn`` or
  ``--prefix``); ``venturi worker myapp:app`` (or ``myapp:create_app``) works too;
* serves the dashboard under a path of the app behind your own login
  (:meth:`Venturi.mount_dashboard`, with Flask-Login or anything that runs in
  a request context).

:func:`register_error_handlers` answers venturi's refusals (``SignalConflict``,
``InvalidTransition``, ...) with 409/404 instead of 500.

Handlers write through ``ctx.session`` (a Session on ``db.engine`` whose
transaction commits with the outcome), not ``db.session``.  A worker holds
up to ``concurrency + 4`` connections of ``db.engine``'s pool: size it with
``SQLALCHEMY_ENGINE_OPTIONS = {"pool_size": ...}`` in worker processes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import click
from click.core import ParameterSource
from flask import Flask, current_app
from flask.cli import AppGroup, with_appcontext

from venturi_sa.models import JobBase
from venturi_sa.queue import Queue
from venturi_sa.task import Task
from venturi_sa.worker.app import WorkerApp
from venturi_sa.worker.context import JobContext

EXTENSION = "venturi"


class Venturi:
    """The extension: ``Venturi(app, db, queue)``, or ``Venturi(db=db, queue=queue)`` then ``init_app(app)``.

    ``worker_options`` are more :class:`~venturi_sa.Worker` keyword arguments
    (``concurrency``, ``on_start``, ``around_run`` for your own scopes, which
    run inside the app context...).
    """

    def __init__(self, app: Flask | None = None, db: Any = None, queue: Queue | None = None,
                 **worker_options: Any) -> None:
        if queue is not None and not isinstance(queue, Queue):
            raise TypeError(f"Venturi(queue=...) takes a venturi_sa.Queue, got {type(queue).__name__}")
        self.db = db
        self.queue = queue
        self.worker_options = dict(worker_options)
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Register the extension and the ``flask venturi`` commands on ``app``."""
        if self.db is None or self.queue is None:
            raise TypeError("Venturi needs db= (a flask_sqlalchemy.SQLAlchemy) and queue= (a venturi_sa.Queue)")
        app.extensions[EXTENSION] = self
        app.cli.add_command(commands)
        app.teardown_request(self._rollback_after_error)

    def _rollback_after_error(self, exc: BaseException | None) -> None:
        """``teardown_request``: a request that ended in an unhandled exception leaves nothing it enqueued.

        Flask-SQLAlchemy closes ``db.session`` when the app context ends, which
        an app context held across requests (a test's ``with app.app_context()``)
        postpones: without this rollback the next request's commit would
        publish the failed request's jobs and rows.
        """
        if exc is not None:
            self.db.session.rollback()

    # -- the web side ------------------------------------------------------------------------
    def enqueue(self, task: Task, **options: Any) -> JobBase:
        """``queue.enqueue(db.session, task)``: joins the request's transaction; never commits."""
        assert self.queue is not None
        return self.queue.enqueue(self.db.session, task, **options)

    def enqueue_many(self, tasks: Sequence[Task], **options: Any) -> list[JobBase]:
        """``queue.enqueue_many(db.session, tasks)``; never commits."""
        assert self.queue is not None
        return self.queue.enqueue_many(self.db.session, tasks, **options)

    @property
    def engine(self) -> Any:
        """``db.engine`` of the current app (needs an app context), for ``queue.get_job(venturi.engine, ...)``."""
        return self.db.engine

    # -- the dashboard -----------------------------------------------------------------------
    def mount_dashboard(self, app: Flask, path: str = "/venturi", *, guard: Guard, **options: Any) -> None:
        """Serve the queue's dashboard under ``path`` of ``app``, each request first passing ``guard``.

        ``guard()`` runs inside a Flask request context built from the request
        (the session, ``flask_login.current_user``, ``g``: what your views see),
        for every page, fragment, live stream and action of the dashboard.  It
        returns True to let the request through, or a response to answer
        instead (a view decorated with ``flask_login.login_required`` returns
        the login redirect or 401 for an anonymous user; ``abort(403)`` works
        too).  ``options`` go to :func:`venturi_sa.web.create_app` (``authorize``,
        ``read_only``, ``redact``, ...); the engine is ``db.engine``.  Needs the
        ``web`` extra and ``a2wsgi``.
        """
        try:
            from a2wsgi import ASGIMiddleware

            from venturi_sa.web import create_app
        except ImportError:
            raise RuntimeError("the dashboard in Flask needs pip install 'venturi[web]' a2wsgi") from None
        assert self.queue is not None
        with app.app_context():
            engine = self.db.engine
        options.setdefault("tasks", self.queue.registry)
        dashboard = ASGIMiddleware(create_app(engine, self.queue.prefix, **options))  # type: ignore[arg-type]
        app.wsgi_app = _Guarded(app, app.wsgi_app, path.rstrip("/"), dashboard, guard)  # type: ignore[method-assign]

    # -- the worker side ---------------------------------------------------------------------
    def worker_app(self, app: Flask) -> WorkerApp:
        """What ``venturi worker`` / ``flask venturi worker`` run: ``db.engine``, each run in the app context."""
        assert self.queue is not None
        options = dict(self.worker_options)
        around = options.pop("around_run", None)
        own = [around] if callable(around) else list(around or [])

        def engine() -> Any:
            with app.app_context():
                return self.db.engine

        def in_app_context(ctx: JobContext) -> Any:
            return app.app_context()

        return WorkerApp(self.queue, engine=engine, on_start=options.pop("on_start", None),
                         on_stop=options.pop("on_stop", None), around_run=[in_app_context, *own],
                         options=options)

    def worker(self, app: Flask, **options: Any) -> Any:
        """A :class:`~venturi_sa.Worker` for ``app`` (e.g. to run in a thread, or in tests)."""
        return self.worker_app(app).worker(**options)


def register_error_handlers(app: Flask) -> None:
    """Answer the venturi errors of :data:`~venturi_sa.contrib.http_errors.STATUS_CODES` raised in ``app``'s views
    with their status (409: ``SignalConflict``, ``TooManySignals``, ``InvalidTransition``; 404: ``JobNotFound``)
    and a JSON body ``{"error": ..., "detail": ...}``, instead of 500; with the extension on ``app``,
    ``db.session`` is rolled back first (what the view wrote before the refusal is not committed).

    A handler the app registers later for one of these classes replaces this one.
    """
    from venturi_sa.contrib.http_errors import STATUS_CODES, body, status_code

    def handle(exc: Exception) -> Any:
        ext = app.extensions.get(EXTENSION)
        if isinstance(ext, Venturi):  # an answered error is no exception at teardown: roll back here
            ext.db.session.rollback()
        return body(exc), status_code(exc) or 500

    for cls in STATUS_CODES:
        app.register_error_handler(cls, handle)


Guard = Callable[[], Any]
"""``guard() -> True | response``, run in a Flask request context before each dashboard request."""


class _Guarded:
    """WSGI: requests under ``path`` pass ``guard`` (in a request context of ``app``), then reach ``dashboard``.

    The guard sees the request as ``app``'s own views do (same script root), so
    ``url_for`` and Flask-Login's login redirect point into the app, not the
    dashboard.
    """

    def __init__(self, app: Flask, inner: Any, path: str, dashboard: Any, guard: Guard) -> None:
        self.app = app
        self.inner = inner
        self.path = path
        self.dashboard = dashboard
        self.guard = guard

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        from werkzeug.exceptions import HTTPException

        path_info = str(environ.get("PATH_INFO", ""))
        if path_info != self.path and not path_info.startswith(self.path + "/"):
            return self.inner(environ, start_response)
        with self.app.request_context(environ):
            try:
                verdict = self.guard()
            except HTTPException as exc:
                verdict = exc.get_response()
            if verdict is not True:
                response = self.app.make_response(verdict if verdict is not False else ("forbidden", 403))
                return response(environ, start_response)
        mounted = {**environ, "SCRIPT_NAME": str(environ.get("SCRIPT_NAME", "")) + self.path,
                   "PATH_INFO": path_info[len(self.path):]}
        return self.dashboard(mounted, start_response)


def extension(app: Flask | None = None) -> Venturi:
    """The :class:`Venturi` of ``app`` (default: the current app); ``RuntimeError`` if it has none."""
    app = app if app is not None else current_app._get_current_object()  # type: ignore[attr-defined]
    ext = app.extensions.get(EXTENSION)
    if not isinstance(ext, Venturi):
        raise RuntimeError("this Flask app has no venturi extension: add Venturi(app, db, queue)")
    return ext


commands = AppGroup("venturi", help="Run venturi workers and inspect the app's queue.")


def _register() -> None:
    from venturi_sa.cli.worker_cmd import run_worker, worker_options

    @commands.command("worker")
    @worker_options
    @with_appcontext
    def worker(**options: Any) -> None:
        """Run a worker for the app's queue on db.engine, each job in the app context, until stopped."""
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        run_worker(extension(app).worker_app(app), **options)

    commands.add_command(_without_app_given(worker))
    forwarded = _app_commands()
    from venturi_sa.cli import cli

    in_app = copy.copy(cli)  # `venturi`, its queue commands without the options the app gives
    in_app.commands = {**cli.commands, **{name: _without_app_given(c) for name, c in forwarded.items()}}
    for name, command in forwarded.items():
        _forward(name, command, in_app)


# What the app gives a `flask venturi` command: the queue (and its prefix) and db.engine's database.
APP_GIVEN = frozenset({"app", "dsn", "prefix"})


def _without_app_given(command: click.Command) -> click.Command:
    """A copy of ``command`` (and of its subcommands) whose ``--app``/``--dsn``/``--prefix`` are not in
    ``--help``, read no ``VENTURI_*`` variable and refuse a typed value (a usage error)."""

    def refuse_typed(inner: Any) -> Any:
        def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
            if ctx.get_parameter_source(param.name or "") is ParameterSource.COMMANDLINE:
                raise click.UsageError(f"flask venturi takes no {param.opts[0]}: the app gives the queue's "
                                       "prefix and its database (db.engine)", ctx=ctx)
            return inner(ctx, param, value) if inner is not None else value
        return callback

    trimmed = copy.copy(command)
    trimmed.params = []
    for param in command.params:
        if isinstance(param, click.Option) and param.name in APP_GIVEN:
            param = copy.copy(param)
            param.hidden, param.envvar, param.callback = True, None, refuse_typed(param.callback)
        trimmed.params.append(param)
    if isinstance(command, click.Group) and isinstance(trimmed, click.Group):
        trimmed.commands = {name: _without_app_given(sub) for name, sub in command.commands.items()}
    return trimmed


# `venturi` commands with no use inside an app: its own worker (above), the throwaway quick start.
NOT_FORWARDED = frozenset({"worker", "quickstart", "demo"})


def _app_commands() -> dict[str, click.Command]:
    """The ``venturi`` commands that act on one queue's database (they take ``--dsn``), by name."""
    from venturi_sa.cli import cli

    def on_a_database(command: click.Command) -> bool:
        if any(param.name == "dsn" for param in command.params):
            return True
        return isinstance(command, click.Group) and any(on_a_database(c) for c in command.commands.values())

    return {name: command for name, command in sorted(cli.commands.items())
            if name not in NOT_FORWARDED and on_a_database(command)}


def _forward(name: str, command: click.Command, in_app: click.Group) -> None:
    """``flask venturi NAME ...``: ``venturi NAME ...`` run as with ``--app`` naming this Flask app.

    ``in_app``'s copy of the venturi command parses the arguments
    (``--help`` shows its help, without ``--app``/``--dsn``/``--prefix``),
    takes the queue's prefix and ``db.engine``'s database from the app
    (never from ``VENTURI_DSN``/``VENTURI_PREFIX``), and fails as the venturi
    command does: one ``venturi: error:`` line, exit status 1 (2 for usage
    mistakes).
    """

    @commands.command(name, help=f"{command.get_short_help_str(80)} (`venturi {name}` on the app's queue)",
                      context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                        "help_option_names": []})
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    @with_appcontext
    def forwarded(args: tuple[str, ...]) -> None:
        from venturi_sa.cli.options import APP_META

        app = current_app._get_current_object()  # type: ignore[attr-defined]
        worker_app = extension(app).worker_app(app)
        with in_app.make_context("flask venturi", [name, *args]) as ctx:
            ctx.meta[APP_META] = worker_app  # what `venturi --app` sets: the prefix, the engine's URL, the tasks
            in_app.invoke(ctx)


_register()
