"""Unit-testing one handler: the worker's decode, run and outcome checks, without a queue table."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from venturi_sa import payloads
from venturi_sa.binds import require_async_session
from venturi_sa.declarations.run_outcomes import RUN_OUTCOMES, Complete, Die, Pause, Retry
from venturi_sa.errors import InvalidOption, Suspended, UnknownKind, VenturiError
from venturi_sa.queue import Queue
from venturi_sa.states import Outcome
from venturi_sa.storage.params import ClaimedJob, FinishParams
from venturi_sa.task import Registry, Task
from venturi_sa.testing.drain import TEST_WORKER
from venturi_sa.testing.handler_session import HandlerSession, for_async_handler
from venturi_sa.testing.pipeline import NOT_RUN, async_proxy, is_async_kind, new_run, run_awaiting, run_pipeline
from venturi_sa.testing.sessions import AnySession, as_session
from venturi_sa.worker.pipeline_stages import UNSTORED_RESULT, note_text
from venturi_sa.worker.run import Run

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession


class RejectedOutcome(VenturiError, AssertionError):
    """The worker would not record what the handler asked for (it would record :attr:`performed`)."""

    def __init__(self, message: str, performed: Performed) -> None:
        super().__init__(message)
        self.performed = performed


@dataclass(frozen=True)
class Performed:
    """What a worker would record for the run.

    ``outcome`` is the journal outcome (``completed``, ``paused``,
    ``retried`` or ``dead``); ``note`` the journal note; ``carry`` the
    carry the job would store (JSON form; ``saved_carry`` False if it would
    keep its old one); ``delay``/``visible_at`` when a ``paused`` or
    ``retried`` job is eligible again (both None: at once); ``failure``
    whether it counts towards ``max_failures``; ``error`` the exception the
    handler raised, if any.
    """

    outcome: Outcome
    note: str | None
    carry: Any
    saved_carry: bool
    delay: timedelta | None
    visible_at: datetime | None
    attachment: Any
    failure: bool
    error: BaseException | None = None

    @classmethod
    def of(cls, params: FinishParams, error: BaseException | None) -> Performed:
        return cls(outcome=params.outcome, note=params.note, carry=params.carry, saved_carry=params.save_carry,
                   delay=params.delay, visible_at=params.visible_at, attachment=params.attachment,
                   failure=params.failure, error=error)


def _task(task: Task | tuple[str, Mapping[str, Any]], queue: Queue | None) -> tuple[Task, Registry]:
    if isinstance(task, Task):
        task_type = type(task)
        if queue is not None and (task_type.kind_name() not in queue.registry
                                  or queue.registry.get(task_type.kind_name()) is not task_type):
            raise UnknownKind(f"task kind {task_type.kind_name()!r} is not registered with this queue")
        return task, queue.registry if queue is not None else Registry([task_type])
    if not (isinstance(task, tuple) and len(task) == 2):
        raise InvalidOption(f"perform takes a Task or a (kind, payload) pair, got {task!r:.80}")
    if queue is None:
        raise InvalidOption("perform((kind, payload)) needs queue=... to find the kind's task type")
    kind, fields = task
    return queue.registry.get(kind)(**fields), queue.registry


def _stored_carry(task_type: type[Task], carry: Any) -> Any:
    """``carry`` as the job row would hold it (dumped through the task's Carry schema, JSON round trip)."""
    if carry is None:
        return None
    schema = task_type.carry_schema
    stored = payloads.dump(schema, carry, "carry") if schema is not None else payloads.ensure_json(carry, "carry")
    return json.loads(json.dumps(stored))


def perform(task: Task | tuple[str, Mapping[str, Any]], *, queue: Queue | None = None,
            session: AnySession | None = None, carry: Any = None, run_count: int = 1, failure_count: int = 0,
            strict: bool = True) -> Performed:
    """Run one handler as a worker would and return the outcome the worker would record.

    The payload takes the round trip of a real job (dumped by its schema as
    at enqueue, through JSON, loaded again as at claim), the handler gets a
    real :class:`~venturi_sa.JobContext` (``run_count``, ``failure_count``,
    ``carry`` as the handler would see it), and its return value is checked
    and classified by the worker's own code.  ``ctx.session`` is
    ``session`` inside a savepoint (kept on success, rolled back if the
    handler raised), or, when ``queue``'s ``session_class`` is another
    class, a session of that class on ``session``'s connection in such a
    savepoint; without ``session`` using it raises.  An ``async def``
    handler's ``ctx.session_async`` needs :func:`perform_async`.  No job
    row is read or written (``ctx.job_id`` is ``"perform-<kind>"``).

    With ``strict`` (the default) a handler exception is re-raised, and an
    outcome the worker would have to correct (``Retry(delay=5)``, a naive
    ``Pause(until=...)``, a non-JSON carry, a broken ``backoff()``, a
    return value that is neither an outcome nor JSON) raises :class:`RejectedOutcome`;
    with ``strict=False`` both are returned as the worker would record
    them.
    """
    task_obj, registry = _task(task, queue)
    task_type = type(task_obj)
    stored = json.loads(json.dumps(task_obj.stored_payload()))
    job = ClaimedJob(id=f"perform-{task_type.kind_name()}", kind=task_type.kind_name(), payload=stored,
                     carry=_stored_carry(task_type, carry), priority=int(task_type.priority),
                     created_at=datetime.now(timezone.utc), run_count=run_count, failure_count=failure_count,
                     claimed_by=TEST_WORKER)
    s = as_session(session) if session is not None else None
    run, result = _run(job, registry, s, queue)
    assert run.params is not None
    error = result if isinstance(result, BaseException) and result is not run.ctx.suspension else None
    performed = Performed.of(run.params, error)
    if strict:
        if error is not None:
            raise error
        problem = _correction(result, run.params)
        if problem:
            raise RejectedOutcome(f"{problem}; a worker would record {run.params.outcome.value}: {run.params.note}",
                                  performed)
    return performed


def _run(job: ClaimedJob, registry: Registry, session: Session | None, queue: Queue | None) -> tuple[Run, Any]:
    """Run ``job``'s handler, its ``ctx.session`` work in a savepoint of ``session`` (kept on success)."""
    proxy = async_proxy(session) if session is not None else None
    if session is None:
        run = new_run(job, _no_session, registry, open_async_session=_no_async_session)
        return run, run_pipeline(run, registry)
    if is_async_kind(registry, job.kind) and proxy is not None:
        handler, handler_async = for_async_handler(session, proxy, queue.async_session_class if queue is not None
                                                   else type(proxy))
        run = new_run(job, lambda: session, registry, open_async_session=lambda: handler_async)
        call: Callable[[], Any] = lambda: run_awaiting(run, registry)  # noqa: E731
    else:
        handler = HandlerSession(session, queue.session_class if queue is not None else type(session))
        run = new_run(job, lambda: handler.session, registry, open_async_session=_no_async_session)
        call = lambda: run_pipeline(run, registry)  # noqa: E731
    try:
        result = call()
        if run.failed:
            handler.discard()
        else:
            handler.keep()
    finally:
        handler.close()
    return run, result


def _no_session() -> Session:
    raise InvalidOption("this handler uses ctx.session: pass perform(..., session=...)")


def _no_async_session() -> AsyncSession:
    raise InvalidOption("this handler uses ctx.session_async: use `await perform_async(task, session=async_session)`")


async def perform_async(task: Task | tuple[str, Mapping[str, Any]], *, queue: Queue | None = None,
                        session: AsyncSession | None = None, carry: Any = None, run_count: int = 1,
                        failure_count: int = 0, strict: bool = True) -> Performed:
    """:func:`perform` from an async test; with ``session``, an ``async def`` handler is awaited on the test's loop.

    ``ctx.session_async`` is ``session`` (the test's ``AsyncSession``; when
    ``queue``'s ``async_session_class`` is another class, one of that class
    on ``session``'s connection) inside a savepoint, kept on success and rolled back if the handler
    raised; a sync handler's ``ctx.session`` is its ``sync_session``, as
    in :func:`perform`.  Without ``session`` the handler runs with no
    database session.
    """
    def call(s: Session | None) -> Performed:
        return perform(task, queue=queue, session=s, carry=carry, run_count=run_count,
                       failure_count=failure_count, strict=strict)

    if session is None:
        from sqlalchemy.util import greenlet_spawn

        return await greenlet_spawn(call, None)
    return await require_async_session(session, "perform_async").run_sync(call)


def _correction(result: Any, params: FinishParams) -> str | None:
    """What the worker changed about the handler's outcome, or None if it records it as asked."""
    if result is NOT_RUN:
        return "the job could not start"
    if isinstance(result, Suspended):
        return None if params.outcome is Outcome.PAUSED else "the suspension was not recorded as paused"
    asked = Complete() if result is None else result
    if not isinstance(asked, RUN_OUTCOMES):
        if params.outcome is Outcome.COMPLETED and not (params.note or "").startswith(UNSTORED_RESULT):
            return None  # a JSON result, recorded as Complete with it as the attachment
        return f"the handler returned {asked!r:.80}, neither an outcome nor a value JSON can store"
    name = type(asked).__name__
    if isinstance(asked, Retry):
        base = note_text(asked.note if isinstance(asked.note, str) and asked.note else "retry requested")
        if params.outcome is Outcome.DEAD and params.failure and (params.note or "").startswith(base + " (failure "):
            return None  # the backstop: max_failures reached
        if params.outcome is Outcome.RETRIED and params.note == base and (
                asked.delay is None or params.delay == asked.delay):
            return None
        return f"the handler's {asked!r:.120} was not recorded as asked"
    wanted = {Complete: Outcome.COMPLETED, Pause: Outcome.PAUSED, Die: Outcome.DEAD}[type(asked)]
    if params.outcome is wanted and not params.failure:
        return None
    return f"the handler's {name} outcome {asked!r:.120} is invalid"


__all__ = ["Performed", "RejectedOutcome", "perform", "perform_async"]
