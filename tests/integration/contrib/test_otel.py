"""OpenTelemetry (``venturi_sa.contrib.otel.instrument``): the enqueue span in the caller's trace, its
context stored with the job, one span per run (the first a child, later ones linked), kind and outcome as
attributes, the trace id in the journal attachment; sync and async handlers, the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy.orm import Session
from support.workers import enqueue, journal

from venturi_sa import JobContext, Queue, Retry, Task, Worker
from venturi_sa.contrib.otel import instrument
from venturi_sa.testing import drain

pytestmark = pytest.mark.timeout(60)
APP: dict[str, trace.Tracer] = {}  # the application's tracer, on the test's provider (set by ``traced``)


class Sync(Task):
    KIND = "otel.sync"

    def run(self, ctx: JobContext) -> Any:
        with APP["tracer"].start_as_current_span("handler work"):
            return None


class Async(Task):
    KIND = "otel.async"

    async def run(self, ctx: JobContext) -> Any:
        await asyncio.sleep(0)
        with APP["tracer"].start_as_current_span("handler work"):
            return None


class Flaky(Task):
    """Fails its first run (retried at once), completes the second."""

    KIND = "otel.flaky"

    def run(self, ctx: JobContext) -> Any:
        return Retry("not yet", delay=timedelta(0)) if ctx.run_count == 1 else None


class Broken(Task):
    KIND = "otel.broken"
    max_failures = 1

    def run(self, ctx: JobContext) -> Any:
        raise ValueError("boom")


class Sleeper(Task):
    KIND = "otel.sleeper"

    def run(self, ctx: JobContext) -> Any:
        ctx.sleep(timedelta(hours=1), name="nap")


class Waiter(Task):
    KIND = "otel.waiter"

    def run(self, ctx: JobContext) -> Any:
        return ctx.wait_for("approved")


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@pytest.fixture
def traced(models: Any, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch) -> Queue:
    """An instrumented queue; the handlers' tracer is on the same provider."""
    monkeypatch.setitem(APP, "tracer", provider.get_tracer("app"))
    queue = Queue(models, [Sync, Async, Flaky, Broken, Sleeper, Waiter])
    instrument(queue, tracer_provider=provider)
    return queue


def run_all(queue: Queue, engine: sa.Engine) -> int:
    """A worker running the queue's hooks, as the pipeline will once it is wired (see test_worker_*)."""
    worker = Worker(queue, engine, concurrency=1, poll_interval=0.2)
    if not set(queue.run_hooks.around_run) <= set(worker.hooks.around_run):  # until the worker adds them itself
        worker.hooks = queue.run_hooks + worker.hooks
    return worker.run_until_idle()


def spans(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def enqueue_in_request(engine: sa.Engine, queue: Queue, provider: TracerProvider, task: Task) -> tuple[str, Any]:
    """Enqueue ``task`` inside the application's ``request`` span; the job id and that span's context."""
    with provider.get_tracer("app").start_as_current_span("request") as request:
        [job_id] = enqueue(engine, queue, task)
    return job_id, request.get_span_context()


def carriers(engine: sa.Engine, queue: Queue) -> dict[str, dict[str, str]]:
    table = queue.models.traces_table
    with engine.connect() as conn:
        return {row.job_id: row.carrier for row in conn.execute(sa.select(table))}


def test_the_enqueue_span_is_in_the_callers_trace_and_stored_with_the_job(
        engine: sa.Engine, traced: Queue, provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    job_id, request = enqueue_in_request(engine, traced, provider, Sync())
    [span] = spans(exporter, "enqueue otel.sync")
    assert span.kind is trace.SpanKind.PRODUCER
    assert span.parent is not None and span.parent.span_id == request.span_id
    assert span.context.trace_id == request.trace_id
    assert span.attributes is not None and span.attributes["venturi.job.id"] == job_id
    traceparent = carriers(engine, traced)[job_id]["traceparent"]
    assert traceparent.startswith(f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-")


def test_an_async_enqueue_is_in_the_callers_trace(
        pg_url: str, engine: sa.Engine, traced: Queue, provider: TracerProvider,
        exporter: InMemorySpanExporter) -> None:
    from sqlalchemy.ext.asyncio import AsyncSession
    from support.drivers import async_driver_engine

    async def main() -> tuple[str, Any]:
        async_engine = async_driver_engine(pg_url, "asyncpg")
        try:
            with provider.get_tracer("app").start_as_current_span("request") as request:
                async with AsyncSession(async_engine) as session, session.begin():
                    job = await traced.enqueue_async(session, Async())
                    job_id = job.id
            return job_id, request.get_span_context()
        finally:
            await async_engine.dispose()

    job_id, request = asyncio.run(main())
    [span] = spans(exporter, "enqueue otel.async")
    assert span.parent is not None and span.parent.span_id == request.span_id
    assert job_id in carriers(engine, traced)


def test_a_rolled_back_enqueue_stores_nothing(engine: sa.Engine, traced: Queue) -> None:
    with Session(engine) as session, session.begin():
        traced.enqueue(session, Sync())
        session.flush()
        assert len(carriers_in(session, traced)) == 1
        session.rollback()
    assert carriers(engine, traced) == {}


def carriers_in(session: Session, queue: Queue) -> list[Any]:
    return list(session.execute(sa.select(queue.models.traces_table)))


def test_without_a_recording_tracer_nothing_is_stored(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Sync])
    instrument(queue, tracer_provider=trace.NoOpTracerProvider())
    enqueue(engine, queue, Sync())
    assert carriers(engine, queue) == {}


def test_instrument_twice_adds_its_hooks_once(models: Any, provider: TracerProvider) -> None:
    queue = Queue(models, [Sync])
    instrument(queue, tracer_provider=provider)
    instrument(queue, tracer_provider=provider)
    assert len(queue.enqueue_hooks) == 1
    assert len(queue.run_hooks.around_run) == 1 and len(queue.run_hooks.on_outcome) == 1


@pytest.mark.parametrize("task", [Sync(), Async()], ids=["sync", "async"])
def test_the_first_run_is_a_child_of_the_enqueue_span(
        engine: sa.Engine, traced: Queue, provider: TracerProvider, exporter: InMemorySpanExporter,
        task: Task) -> None:
    job_id, request = enqueue_in_request(engine, traced, provider, task)
    assert run_all(traced, engine) == 1
    [enqueued] = spans(exporter, f"enqueue {task.KIND}")
    [run] = spans(exporter, f"run {task.KIND}")
    assert run.kind is trace.SpanKind.CONSUMER
    assert run.parent is not None and run.parent.span_id == enqueued.context.span_id
    assert run.context.trace_id == request.trace_id
    assert run.attributes is not None
    assert (run.attributes["venturi.job.kind"], run.attributes["venturi.job.id"],
            run.attributes["venturi.job.run"]) == (task.KIND, job_id, 1)
    [work] = spans(exporter, "handler work")  # the handler's own spans are the run's children
    assert work.parent is not None and work.parent.span_id == run.context.span_id


def test_later_runs_start_their_own_trace_linked_to_the_enqueue_span(
        engine: sa.Engine, traced: Queue, provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    enqueue_in_request(engine, traced, provider, Flaky())
    assert run_all(traced, engine) == 2
    [enqueued] = spans(exporter, "enqueue otel.flaky")
    first, second = sorted(spans(exporter, "run otel.flaky"), key=lambda s: s.attributes["venturi.job.run"])  # type: ignore[index]
    assert first.parent is not None and first.parent.span_id == enqueued.context.span_id
    assert second.parent is None and second.context.trace_id != enqueued.context.trace_id
    assert [link.context.span_id for link in second.links] == [enqueued.context.span_id]
    assert not first.links


def test_a_raising_handler_marks_its_run_span(
        engine: sa.Engine, traced: Queue, exporter: InMemorySpanExporter) -> None:
    enqueue(engine, traced, Broken())
    run_all(traced, engine)
    [run] = spans(exporter, "run otel.broken")
    assert run.status.status_code is trace.StatusCode.ERROR
    assert [e.name for e in run.events] == ["exception"]
    assert run.events[0].attributes is not None and run.events[0].attributes["exception.type"] == "ValueError"


@pytest.mark.parametrize(("task", "what", "name"), [(Sleeper(), "sleep", "nap"), (Waiter(), "wait", "approved")],
                         ids=["sleep", "wait_for"])
def test_a_suspended_run_is_traced_as_suspended_not_as_an_error(
        engine: sa.Engine, traced: Queue, exporter: InMemorySpanExporter, task: Task, what: str, name: str) -> None:
    [job_id] = enqueue(engine, traced, task)
    run_all(traced, engine)
    [run] = spans(exporter, f"run {task.KIND}")
    assert run.status.status_code is trace.StatusCode.UNSET
    assert [e.name for e in run.events] == ["venturi.suspended"]
    attributes = dict(run.attributes or {})
    assert attributes["venturi.job.outcome"] == "paused"
    assert (attributes["venturi.job.suspended"], attributes["venturi.job.suspended.name"]) == (what, name)
    [paused] = journal(engine, traced.models, job_id)
    assert paused.outcome == "paused"
    if what == "sleep":  # the wake time; a wait without a timeout has none
        job = traced.get_job(engine, job_id)
        assert attributes["venturi.job.suspended.until"] == job.visible_at.isoformat()
    else:
        assert "venturi.job.suspended.until" not in attributes


# -- what needs the pipeline: outcome reported to hooks, the queue's hooks run by every runner ----------

@pytest.mark.parametrize("task", [Sync(), Async()], ids=["sync", "async"])
def test_the_outcome_is_a_run_span_attribute(
        engine: sa.Engine, traced: Queue, exporter: InMemorySpanExporter, task: Task) -> None:
    enqueue(engine, traced, task)
    run_all(traced, engine)
    [run] = spans(exporter, f"run {task.KIND}")
    assert run.attributes is not None and run.attributes.get("venturi.job.outcome") == "completed"


def test_the_trace_id_is_in_a_failed_runs_journal_attachment(
        engine: sa.Engine, traced: Queue, exporter: InMemorySpanExporter) -> None:
    [job_id] = enqueue(engine, traced, Flaky())
    run_all(traced, engine)
    retried, completed = journal(engine, traced.models, job_id)
    [first, _] = sorted(spans(exporter, "run otel.flaky"), key=lambda s: s.attributes["venturi.job.run"])  # type: ignore[index]
    assert retried.outcome == "retried" and retried.attachment == {"trace_id": f"{first.context.trace_id:032x}"}
    assert completed.outcome == "completed" and completed.attachment is None  # the job's result, untouched


def test_a_worker_runs_the_queues_hooks_by_itself(
        engine: sa.Engine, traced: Queue, exporter: InMemorySpanExporter) -> None:
    enqueue(engine, traced, Sync())
    assert Worker(traced, engine, concurrency=1, poll_interval=0.2).run_until_idle() == 1
    assert len(spans(exporter, "run otel.sync")) == 1


def test_drain_runs_the_queues_hooks(engine: sa.Engine, traced: Queue, exporter: InMemorySpanExporter) -> None:
    with Session(engine) as session, session.begin():
        traced.enqueue(session, Sync())
        drain(session, traced)
        [enqueued] = spans(exporter, "enqueue otel.sync")
        [run] = spans(exporter, "run otel.sync")
        assert run.parent is not None and run.parent.span_id == enqueued.context.span_id
        session.rollback()


# -- the on_outcome seam (venturi_sa.run_hooks) ----------------------------------------------------

def test_on_outcome_hooks_may_replace_the_outcome_and_never_break_it(caplog: pytest.LogCaptureFixture) -> None:
    from venturi_sa.run_hooks import RunHooks
    from venturi_sa.states import Outcome
    from venturi_sa.storage.params import Fence, FinishParams

    params = FinishParams(fence=Fence("j1", "k", "w", 1), outcome=Outcome.RETRIED, note="n", failure=True)
    richer = FinishParams(fence=params.fence, outcome=Outcome.RETRIED, note="n", attachment={"a": 1}, failure=True)
    other = FinishParams(fence=params.fence, outcome=Outcome.COMPLETED)

    def boom(ctx: Any, p: FinishParams) -> None:
        raise RuntimeError("hook bug")

    hooks = RunHooks.of(on_outcome=[boom, lambda ctx, p: other, lambda ctx, p: None, lambda ctx, p: richer])
    assert hooks.outcome(None, params) is richer  # type: ignore[arg-type]
    logged = [(r.getMessage(), r.exc_info[1] if r.exc_info else None) for r in caplog.records]
    assert any("raised; the outcome is kept" in m and isinstance(e, RuntimeError) and str(e) == "hook bug"
               for m, e in logged), logged
    assert any("not the run's FinishParams" in m for m, _ in logged), logged
    assert RunHooks().outcome(None, params) is params  # type: ignore[arg-type]
