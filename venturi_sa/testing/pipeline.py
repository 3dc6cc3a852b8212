"""One run through the worker's own pipeline, keeping what the handler returned or raised.

:func:`venturi_sa.worker.pipeline.decide` itself, so the test helpers record
exactly the :class:`~venturi_sa.storage.params.FinishParams` a worker would,
and can also hand the test the handler's raw result (to re-raise an
exception with its traceback, or to tell that an outcome was corrected).

An ``async def`` handler whose test holds an ``AsyncSession`` runs through
:func:`run_awaiting`: the same :func:`~venturi_sa.worker.pipeline.decide`,
with the coroutine awaited on the *test's* event loop through SQLAlchemy's
greenlet bridge, because the test's async connection belongs to that loop and
the worker's own loop thread cannot use it.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from venturi_sa.payloads import DEFAULT_MAX_PAYLOAD_BYTES
from venturi_sa.run_hooks import NO_HOOKS, RunHooks
from venturi_sa.storage.durable_backend import WorkerBackend
from venturi_sa.storage.params import ClaimedJob, Runner
from venturi_sa.task import Registry
from venturi_sa.worker.checkpoint import BlockingCall, Checkpointer
from venturi_sa.worker.context import JobContext
from venturi_sa.worker.joblog import job_log
from venturi_sa.worker.pipeline import NOT_RUN
from venturi_sa.worker.pipeline import decide as run_pipeline
from venturi_sa.worker.pipeline_stages import await_here
from venturi_sa.worker.run import Run

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession


Begin = Callable[[Callable[[Runner], bool]], bool]


def new_run(job: ClaimedJob, open_session: Callable[[], Session], registry: Registry,
            backend: WorkerBackend | None = None, open_async_session: Callable[[], AsyncSession] | None = None,
            begin: Begin | None = None, hooks: RunHooks = NO_HOOKS,
            max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> Run:
    """A run of ``job`` whose ``ctx.session`` is whatever ``open_session`` returns.

    With ``backend``, ``ctx.checkpoint()`` writes (fenced) in that same
    session (or through ``begin``), i.e. in the test's transaction; without,
    it only checks and keeps the carry.  ``open_async_session`` gives
    ``ctx.session_async``; ``hooks`` are the queue's run hooks (tracing).
    """
    schema = registry.get(job.kind).carry_schema if job.kind in registry else None

    def in_session(fn: Callable[[Runner], bool]) -> bool:
        return fn(open_session())

    chosen = begin or in_session
    checkpointer = Checkpointer(job.fence, schema, backend, chosen if backend is not None else None)
    ctx = JobContext(job, job.carry, open_session, job_log(job), open_async_session,
                     max_payload_bytes=max_payload_bytes, checkpointer=checkpointer)
    run = Run(job=job, ctx=ctx, hooks=hooks)
    return run


def async_begin(session: AsyncSession) -> Begin:
    """Checkpoints of an async handler's run: in ``session``, on the test's loop.

    ``ctx.checkpoint_async`` (``ctx.step_async``, ``ctx.sleep_async``,
    ``ctx.wait_for_async``) calls it from a thread while the handler awaits,
    so the statement is handed to the loop; a sync ``ctx.checkpoint`` (or
    ``ctx.step``, ``ctx.sleep``, ``ctx.wait_for``) from the handler's own
    coroutine would block that loop and is refused with
    :class:`~venturi_sa.worker.checkpoint.BlockingCall`, which the ``ctx``
    method re-raises naming its twin.
    """
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()

    def begin(fn: Callable[[Runner], bool]) -> bool:
        if threading.get_ident() == loop_thread:
            raise BlockingCall("a sync ctx call from an async def handler under drain_async: use its *_async twin")
        return asyncio.run_coroutine_threadsafe(session.run_sync(fn), loop).result()

    return begin


def is_async_kind(registry: Registry, kind: str) -> bool:
    """Whether ``kind``'s handler is an ``async def``."""
    return kind in registry and registry.get(kind).is_async


def async_proxy(session: Session) -> AsyncSession | None:
    """The ``AsyncSession`` whose ``sync_session`` is ``session`` (inside ``run_sync``), if any."""
    if "sqlalchemy.ext.asyncio" not in sys.modules:  # never imported: no AsyncSession exists
        return None
    from sqlalchemy.ext.asyncio import async_session

    return async_session(session)


def run_awaiting(run: Run, registry: Registry) -> Any:
    """:func:`run_pipeline` for an ``async def`` handler, called inside ``AsyncSession.run_sync``.

    The worker's own steps (decode, run, classify, cancel, outcome hooks),
    with the coroutine awaited on the test's loop
    (:func:`~venturi_sa.worker.pipeline_stages.await_here`); no time limit is armed.
    """
    return run_pipeline(run, registry, awaiter=await_here)


__all__ = ["NOT_RUN", "async_begin", "async_proxy", "is_async_kind", "new_run", "run_awaiting", "run_pipeline"]
