"""Running one claimed job, as a pipeline of small steps.

decode payload -> resolve task -> build context -> run -> classify outcome.
The result is a :class:`Run`, which the completer persists.  No step lets an
exception escape: whatever the handler does, the run ends in an outcome.
"""

from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from venturi_sa import payloads
from venturi_sa.errors import VenturiError
from venturi_sa.outcomes import RUN_OUTCOMES, Complete, Die, Pause, Retry
from venturi_sa.states import Outcome
from venturi_sa.storage.params import ClaimedJob, FinishParams
from venturi_sa.task import Registry, Task
from venturi_sa.worker.context import JobContext
from venturi_sa.worker.joblog import running

logger = logging.getLogger("venturi_sa.worker")
MAX_NOTE = 2000


@dataclass
class Run:
    """One run in progress: the claimed job, its context and, once known, its outcome."""

    job: ClaimedJob
    ctx: JobContext
    task_type: type[Task] | None = None
    task: Task | None = None
    params: FinishParams | None = None
    failed: bool = False  # the handler raised: its session work must be rolled back
    released: bool = False  # released at shutdown while still running: skip persisting
    slot_freed: bool = False  # the handler returned; the outcome may still be on its way
    duration: float = 0.0  # seconds the pipeline (decode, handler, classify) took


def _note(text: object) -> str:
    note = str(text)
    return note if len(note) <= MAX_NOTE else note[: MAX_NOTE - 3] + "..."


def _exception_note(exc: BaseException) -> str:
    message = str(exc) or type(exc).__name__
    return _note(f"{type(exc).__name__}: {message}" if str(exc) else message)


def prepare(run: Run, registry: Registry) -> None:
    """Resolve the task type and rebuild the task and carry; poison input ends ``dead``."""
    job = run.job
    if job.kind not in registry:
        run.params = _dead(run, f"no task type is registered for kind {job.kind!r} in this worker")
        return
    run.task_type = registry.get(job.kind)
    try:
        run.task = run.task_type.from_stored(job.payload)
        schema = run.task_type.carry_schema
        if schema is not None and job.carry is not None:
            run.ctx.carry = payloads.load(schema, job.carry, "stored carry")
        else:
            run.ctx.carry = job.carry
    except VenturiError as exc:
        run.params = _dead(run, f"stored payload cannot be decoded, retrying cannot help: {exc}")


def execute(run: Run) -> Any:
    """Call the handler; return what it returned, or the exception it raised."""
    assert run.task is not None
    try:
        return run.task.run(run.ctx)
    except BaseException as exc:  # noqa: BLE001 - a handler may raise anything; the run must end
        run.failed = True
        run.ctx.log.warning("job raised %s", _exception_note(exc),
                            exc_info=not isinstance(exc, (Exception,)) or None)
        run.ctx.log.debug("traceback:\n%s", "".join(traceback.format_exception(exc)))
        return exc


def _finish(run: Run, outcome: Outcome, note: str | None, **extra: Any) -> FinishParams:
    return FinishParams(fence=run.job.fence, outcome=outcome, note=note,
                        attachment=run.ctx.attachment, **extra)


def _dead(run: Run, note: str, failure: bool = False) -> FinishParams:
    return _finish(run, Outcome.DEAD, _note(note), failure=failure)


def failure(run: Run, note: str, delay: timedelta | None = None, carry: dict[str, Any] | None = None
            ) -> FinishParams:
    """A retryable failure: ``retried`` after the backoff, or ``dead`` at ``max_failures``."""
    task_type = run.task_type
    max_failures = task_type.max_failures if task_type else 1
    failures = run.job.failure_count + 1
    if failures >= max_failures:
        return _finish(run, Outcome.DEAD, _note(f"{note} (failure {failures} of max_failures {max_failures})"),
                       failure=True, **(carry or {}))
    wait = delay if delay is not None else (task_type.backoff(failures) if task_type else timedelta(0))
    return _finish(run, Outcome.RETRIED, _note(note), failure=True, delay=wait, **(carry or {}))


def _carry(run: Run) -> dict[str, Any]:
    schema = run.task_type.carry_schema if run.task_type else None
    value = run.ctx.carry
    stored = payloads.dump(schema, value, "carry") if schema is not None and value is not None else value
    return {"carry": payloads.ensure_json(stored, "carry"), "save_carry": True}


def _pause(run: Run, result: Pause, carry: dict[str, Any]) -> FinishParams:
    until = result.until
    if until is not None and (not isinstance(until, datetime) or until.tzinfo is None):
        return failure(run, f"Pause(until={until!r}) needs a timezone-aware datetime", carry=carry)
    return _finish(run, Outcome.PAUSED, result.note, visible_at=until, delay=result.delay, **carry)


def classify(run: Run, result: Any) -> FinishParams:
    """Turn the handler's return value (or exception) into the row write to persist."""
    if isinstance(result, BaseException):
        return failure(run, _exception_note(result))
    if result is None:
        result = Complete()
    if not isinstance(result, RUN_OUTCOMES):
        return _dead(run, f"handler returned {result!r}; expected Complete, Pause, Retry, Die or None")
    try:
        carry = _carry(run)
    except VenturiError as exc:
        return failure(run, f"cannot store carry: {exc}")
    if isinstance(result, Complete):
        return _finish(run, Outcome.COMPLETED, result.note, **carry)
    if isinstance(result, Pause):
        return _pause(run, result, carry)
    if isinstance(result, Retry):
        return failure(run, result.note or "retry requested", delay=result.delay, carry=carry)
    assert isinstance(result, Die)
    return _finish(run, Outcome.DEAD, _note(result.note), **carry)


def process(run: Run, registry: Registry) -> None:
    """The whole pipeline for one run; sets ``run.params`` and ``run.duration``."""
    started = time.monotonic()
    try:
        with running(run.job):
            prepare(run, registry)
            if run.params is None:
                run.params = classify(run, execute(run))
    finally:
        run.duration = time.monotonic() - started
