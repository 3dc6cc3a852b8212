"""OpenTelemetry from enqueue to run: ``instrument(queue)`` (the ``otel`` extra).

After ``instrument(queue)``:

* each enqueue call (``queue.enqueue``/``enqueue_many`` and their async
  forms) makes one ``enqueue <kind>`` span (``PRODUCER``) in the caller's
  current trace, and stores its context (W3C ``traceparent``/``tracestate``
  through the global propagator) in ``<prefix>_traces`` (migration v8), in
  the enqueue's transaction: it commits and rolls back with the jobs.  A job
  a dedup merge returned keeps the context it was created with.  Without a
  recording span (no SDK configured) nothing is stored;
* each run of a job makes one ``run <kind>`` span (``CONSUMER``), current
  while the handler runs (and while its outcome hook runs), so the
  handler's own spans (database, HTTP) are its children.  The first run is a
  child of the enqueue span; later runs (retries, a rerun after a crash)
  start their own trace and carry a link to the enqueue span;
* the run span has the job's kind, id and run number as attributes, and,
  once the worker reports outcomes to hooks (``venturi_sa.run_hooks``),
  the outcome; the run's journal attachment then gets ``trace_id`` (the run
  span's, 32 hex digits) unless the run completed: a completed run's
  attachment is the job's result and stays exactly what the handler returned.
* a run that suspends (``ctx.sleep``, ``ctx.sleep_until``, ``ctx.wait_for``)
  is not an error: its span's status stays unset, it gets a
  ``venturi.suspended`` event and the attributes ``venturi.job.suspended``
  (``"sleep"`` or ``"wait"``), ``venturi.job.suspended.name`` and, unless a
  wait has no timeout, ``venturi.job.suspended.until`` (ISO 8601), and its
  outcome is ``paused``; the run that resumes the job is a span of its own.

Every runner of the queue (``venturi worker``, ``Worker``, ``WorkerApp``,
``drain``) runs the queue's hooks: call ``instrument`` once, where the queue
is defined, before building workers.  Reading the context costs one primary-key
lookup per run (for an ``async def`` handler it runs on the worker's loop).
A crash mid-run loses the unfinished span; the next run links to the enqueue
span as usual.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, TracerProvider, format_trace_id

from venturi_sa import run_hooks
from venturi_sa.errors import Suspended
from venturi_sa.states import Outcome
from venturi_sa.storage import traces
from venturi_sa.storage.params import FinishParams, Runner

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from venturi_sa.models import JobBase, Models
    from venturi_sa.queue import Queue
    from venturi_sa.worker.context import JobContext

TRACER_NAME = "venturi_sa.contrib.otel"
SYSTEM = "venturi"
ATTACHMENT_KEY = "trace_id"


def instrument(queue: Queue, *, tracer_provider: TracerProvider | None = None) -> None:
    """Trace ``queue``'s enqueues and runs with ``tracer_provider`` (default: the global one).

    Adds an enqueue hook and the queue's ``around_run``/``on_outcome`` hooks;
    a second call for the same queue does nothing.  The queue's tables must
    be at migration v8 or later (``<prefix>_traces``).
    """
    if any(isinstance(hook, _Tracing) for hook in queue.run_hooks.on_outcome):
        return
    try:
        release = version("venturi")
    except PackageNotFoundError:  # a source checkout
        release = None
    tracing = _Tracing(queue.models, trace.get_tracer(TRACER_NAME, release, tracer_provider=tracer_provider))
    queue.enqueue_hooks.insert(0, tracing.enqueued)  # before testing.inline's runner, so its runs see the context
    queue.run_hooks = queue.run_hooks + run_hooks.RunHooks.of(around_run=tracing.around_run, on_outcome=tracing)


class _RunSpan:
    __slots__ = ("span", "ended", "trace_id")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.ended = False
        self.trace_id = format_trace_id(span.get_span_context().trace_id)

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            self.span.end()


class _Tracing:
    """One instrumented queue's hooks: the enqueue hook, ``around_run`` and (called as) ``on_outcome``."""

    def __init__(self, models: Models, tracer: trace.Tracer) -> None:
        self.models = models
        self.tracer = tracer
        self._runs: weakref.WeakKeyDictionary[JobContext, _RunSpan] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    # -- enqueue ----------------------------------------------------------------------------------
    def enqueued(self, session: Session, jobs: list[JobBase]) -> None:
        """The enqueue hook: one span for the call, its context stored with each job, in ``session``."""
        if not jobs:
            return
        kinds = sorted({job.kind for job in jobs})
        attributes: dict[str, Any] = {"messaging.system": SYSTEM, "messaging.operation.type": "create",
                                      "venturi.queue": self.models.prefix, "venturi.job.count": len(jobs)}
        if len(kinds) == 1:
            attributes["venturi.job.kind"] = kinds[0]
        if len(jobs) == 1:
            attributes["venturi.job.id"] = jobs[0].id
        name = f"enqueue {kinds[0]}" if len(kinds) == 1 else "enqueue"
        with self.tracer.start_as_current_span(name, kind=SpanKind.PRODUCER, attributes=attributes):
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            if carrier:
                traces.save_carrier(session, self.models, [job.id for job in jobs], carrier)

    # -- runs -------------------------------------------------------------------------------------
    def around_run(self, ctx: JobContext) -> AbstractContextManager[Any]:
        """The run's span, started at the first call of the application's code and current in each."""
        with self._lock:
            known = self._runs.get(ctx)
        if known is not None:  # the run's outcome hook (Task.on_dead, ...): inside the run's span
            return trace.use_span(known.span, end_on_exit=False)
        return self._run_scope(ctx)

    @contextmanager
    def _run_scope(self, ctx: JobContext) -> Iterator[None]:
        span = self._start(ctx)
        run = _RunSpan(span)
        with self._lock:
            self._runs[ctx] = run
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            yield
        except Suspended as exc:
            if exc is not ctx.suspension:  # not the run's own (a handler raised one): a failure
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"Suspended: {exc}"[:200]))
            else:
                _suspended(span, exc)
            raise
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:200]))
            raise
        finally:
            otel_context.detach(token)

    def _start(self, ctx: JobContext) -> Span:
        """A run span: the enqueue span's child on the first run, else linked to it."""
        carrier = self._carrier(ctx)
        enqueued = propagate.extract(carrier) if carrier else None
        origin = trace.get_current_span(enqueued).get_span_context() if enqueued is not None else None
        attributes: dict[str, Any] = {"messaging.system": SYSTEM, "messaging.operation.type": "process",
                                      "venturi.queue": self.models.prefix, "venturi.job.kind": ctx.kind,
                                      "venturi.job.id": ctx.job_id, "venturi.job.run": ctx.run_count}
        name = f"run {ctx.kind}"
        if origin is not None and origin.is_valid and ctx.run_count == 1:
            return self.tracer.start_span(name, context=enqueued, kind=SpanKind.CONSUMER, attributes=attributes)
        links = [Link(origin)] if origin is not None and origin.is_valid else []
        return self.tracer.start_span(name, context=otel_context.Context(), kind=SpanKind.CONSUMER,
                                      attributes=attributes, links=links)

    def _carrier(self, ctx: JobContext) -> dict[str, str] | None:
        """The stored context of the run's job, read in a short transaction of the runner's (None without one)."""
        checkpointer = ctx.checkpointer
        if checkpointer is None or checkpointer.backend is None or checkpointer.begin is None:
            return None  # venturi_sa.testing.perform: no database
        found: list[dict[str, str] | None] = []

        def read(runner: Runner) -> bool:
            found.append(traces.load_carrier(runner, self.models, ctx.job_id))
            return True

        checkpointer.begin(read)
        return found[0] if found else None

    def __call__(self, ctx: JobContext, params: FinishParams) -> FinishParams | None:
        """``on_outcome``: the outcome on the run's span, which ends; ``trace_id`` in the attachment."""
        with self._lock:
            run = self._runs.get(ctx)
        if run is None:
            return None
        if not run.ended:
            run.span.set_attribute("venturi.job.outcome", params.outcome.value)
            if params.failure:
                run.span.set_status(Status(StatusCode.ERROR, params.note[:200] if params.note else None))
            run.end()
        return _with_trace_id(params, run.trace_id)


def _suspended(span: Span, exc: Suspended) -> None:
    """Mark ``span`` as a run that suspended (status left unset): attributes and a ``venturi.suspended`` event."""
    attributes: dict[str, Any] = {"venturi.job.suspended": exc.what, "venturi.job.suspended.name": exc.name}
    if exc.until is not None:
        attributes["venturi.job.suspended.until"] = exc.until.isoformat()
    span.set_attributes(attributes)
    span.add_event("venturi.suspended", {**attributes, "venturi.note": exc.note})


def _with_trace_id(params: FinishParams, trace_id: str) -> FinishParams | None:
    """``params`` with ``trace_id`` in a non-completed run's attachment (None, or a dict without the key)."""
    attachment = params.attachment
    if params.outcome is Outcome.COMPLETED:
        return None
    if attachment is None:
        attachment = {ATTACHMENT_KEY: trace_id}
    elif isinstance(attachment, dict) and ATTACHMENT_KEY not in attachment:
        attachment = {**attachment, ATTACHMENT_KEY: trace_id}
    else:
        return None
    return dataclasses.replace(params, attachment=attachment)  # every other field as it was, checked again


__all__ = ["ATTACHMENT_KEY", "TRACER_NAME", "instrument"]
