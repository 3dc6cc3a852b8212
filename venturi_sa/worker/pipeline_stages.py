"""The steps of a run that decide its outcome: prepare, execute, classify, control; and the wake stage.

:mod:`~venturi_sa.worker.pipeline` calls the first four in that order inside one
catch-all; the completer calls :func:`wake` after the fenced write.  Every
step that runs user code (schema hooks, the handler,
``backoff()``, the carry schema) turns whatever it raises (``SystemExit``
too; only ``KeyboardInterrupt`` passes, see :func:`absorb`) into a
validated :class:`~venturi_sa.storage.params.FinishParams`.  An ``async
def`` handler runs as a task on the worker's loop (:mod:`~venturi_sa.worker.loop`)
while the executor thread waits for that task, so it holds its slot and
counts against its kind's cap until its coroutine has ended.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta
from types import CoroutineType
from typing import Any

from sqlalchemy.exc import StatementError

from venturi_sa import payloads
from venturi_sa.declarations.run_outcomes import RUN_OUTCOMES, Complete, Die, Pause, Retry
from venturi_sa.errors import InvalidPayload, JobCancelled, Suspended
from venturi_sa.run_hooks import NOTHING
from venturi_sa.states import Outcome
from venturi_sa.storage.backend import Tx
from venturi_sa.storage.params import NOTE_LIMIT, FinishParams, InvalidOutcome
from venturi_sa.task import Registry, Task
from venturi_sa.worker.durable import wake_check
from venturi_sa.worker.joblog import running
from venturi_sa.worker.loop import worker_loop
from venturi_sa.worker.run import Run
from venturi_sa.worker.run_sessions import RunSession
from venturi_sa.worker.tracebacks import error_attachment

logger = logging.getLogger("venturi_sa.worker")


def absorb(exc: BaseException) -> None:
    """Let a ``KeyboardInterrupt`` through; any other exception from user code becomes the run's failure.

    ``SystemExit`` (a schema hook calling ``sys.exit``) and the rest of
    ``BaseException`` are recorded like any error, so the run still ends in
    an outcome instead of waiting for its lease to expire.
    """
    if isinstance(exc, KeyboardInterrupt):
        raise exc


def note_text(text: object) -> str:
    """Any object as a storable note: a string, NUL-free, at most ``NOTE_LIMIT`` characters."""
    try:
        note = text if isinstance(text, str) else str(text)
    except BaseException as exc:  # noqa: BLE001 - a broken __str__ must not stop the run from ending
        absorb(exc)
        note = f"<unprintable {type(text).__name__}>"
    note = note.replace("\x00", "\\x00")
    return note if len(note) <= NOTE_LIMIT else note[: NOTE_LIMIT - 3] + "..."


def exception_note(exc: BaseException) -> str:
    """``Type: message`` of ``exc`` as a storable note; a failed statement's parameters (payloads) are left out."""
    if isinstance(exc, StatementError):
        exc.hide_parameters = True  # notes and log lines never carry a payload, whatever the engine's setting
    message = note_text(exc)
    return note_text(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)


def _finish(run: Run, outcome: Outcome, note: str | None, **extra: Any) -> FinishParams:
    return FinishParams(fence=run.fence, outcome=outcome, note=note, attachment=run.ctx.attachment, **extra)


def _safe_attachment(run: Run) -> Any:
    try:
        return payloads.ensure_json(run.ctx.attachment, "attachment", run.ctx.max_payload_bytes)
    except BaseException as exc:  # noqa: BLE001 - an invalid attachment is dropped from a failure record
        absorb(exc)
        return None


def _backoff(run: Run, failures: int) -> tuple[timedelta, str]:
    """The task's backoff for this failure, or the default one if it raised or returned nonsense."""
    task_type = run.task_type
    if task_type is None:
        return timedelta(0), ""
    try:
        wait = task_type.backoff(failures)
        if isinstance(wait, timedelta) and wait >= timedelta(0):
            return wait, ""
        problem = f"{task_type.__name__}.backoff() returned {wait!r}, not a non-negative timedelta"
    except BaseException as exc:  # noqa: BLE001 - user code
        absorb(exc)
        problem = f"{task_type.__name__}.backoff() raised {exception_note(exc)}"
    run.ctx.log.warning("%s; using the default backoff", problem)
    return Task.backoff(failures), f" ({problem}; used the default backoff)"


def failure(run: Run, note: str, delay: timedelta | None = None, carry: dict[str, Any] | None = None
            ) -> FinishParams:
    """A retryable failure: ``retried`` after the backoff, or ``dead`` at ``max_failures``.

    Built from sanitized values only: it cannot raise :class:`InvalidOutcome`.
    """
    task_type = run.task_type
    max_failures = task_type.max_failures if task_type else 1
    failures = run.job.failure_count + 1
    extra = dict(carry or {})
    attachment = _safe_attachment(run)
    if failures >= max_failures:
        return FinishParams(fence=run.fence, outcome=Outcome.DEAD, attachment=attachment, failure=True,
                            note=note_text(f"{note} (failure {failures} of max_failures {max_failures})"),
                            **extra)
    suffix = ""
    if delay is None:
        delay, suffix = _backoff(run, failures)
    return FinishParams(fence=run.fence, outcome=Outcome.RETRIED, note=note_text(note + suffix),
                        attachment=attachment, failure=True, delay=delay, **extra)


def prepare(run: Run, registry: Registry) -> FinishParams | None:
    """Resolve the task type and rebuild the task and carry; poison input ends ``dead``."""
    job = run.job
    if job.kind not in registry:
        return _finish(run, Outcome.DEAD, f"no task type is registered for kind {job.kind!r} in this worker")
    run.task_type = registry.get(job.kind)
    try:
        run.task = run.task_type.from_stored(job.payload)
        schema = run.task_type.carry_schema
        run.ctx.carry = payloads.load(schema, job.carry, "stored carry") if (
            schema is not None and job.carry is not None) else job.carry
    except BaseException as exc:  # noqa: BLE001 - schema hooks are user code
        absorb(exc)
        return FinishParams(fence=run.fence, outcome=Outcome.DEAD, note=note_text(
            f"stored payload or carry cannot be decoded, retrying cannot help: {exception_note(exc)}"))
    return None


async def _in_run(run: Run, coro: Coroutine[Any, Any, Any]) -> Any:
    with running(run.job), run.hooks.around(run.ctx):  # the run's log context and scope, on the loop's task too
        return await coro


def await_on_loop(run: Run, coro: Coroutine[Any, Any, Any]) -> Any:
    """Run an async handler's coroutine as a task on the worker's loop; this thread waits for the task.

    ``run.cancel_task()`` cancels it meanwhile (a cancel, a time limit, a
    stop past the grace period); this returns (or raises) only once the task
    has ended, its ``except CancelledError``/``finally`` code included, so
    the run keeps its slot and its session until then.
    """
    running = worker_loop().start(_in_run(run, coro))
    run.running = running
    if run.released or run.ctx.cancelled:  # released or cancelled before ``run.running`` was there
        running.cancel()
    try:
        return running.result()
    finally:
        run.running = None


def await_here(run: Run, coro: Coroutine[Any, Any, Any]) -> Any:
    """Await an async handler's coroutine on the caller's event loop, from inside SQLAlchemy's greenlet bridge.

    For the testing helpers: a test's ``AsyncSession`` belongs to the test's
    loop, so its handler is awaited there (``await_only``), in the run's log
    context and hooks as on the worker's loop, rather than on the worker's.
    """
    from sqlalchemy.util import await_only  # here: greenlet is only needed where async handlers run

    return await_only(_in_run(run, coro))


Awaiter = Callable[[Run, Coroutine[Any, Any, Any]], Any]
"""How :func:`execute` waits for an ``async def`` handler: :func:`await_on_loop` or :func:`await_here`."""


def execute(run: Run, awaiter: Awaiter = await_on_loop) -> Any:
    """Call the handler (awaiting it through ``awaiter`` if it is async); return what it returned or raised."""
    assert run.task is not None
    try:
        with run.hooks.around(run.ctx) if not run.task.is_async else NOTHING:
            result = run.task.run(run.ctx)
        if isinstance(result, CoroutineType):
            result = awaiter(run, result)
        return result
    except BaseException as exc:  # noqa: BLE001 - a handler may raise anything; the run must end
        if isinstance(exc, Suspended) and exc is run.ctx.suspension:
            return exc  # a durable sleep or wait: not a failure, its ctx.session work commits with the pause
        absorb(exc)
        run.failed = True
        note = exception_note(exc)
        if run.ctx.cancelled and isinstance(exc, (JobCancelled, asyncio.CancelledError)):
            run.ctx.log.debug("job stopped on its cancel: %s", note)  # the outcome's one line says the rest
            return exc
        run.ctx.log.warning("job raised %s", note, exc_info=exc)  # once, with the whole traceback
        if run.ctx.attachment is None:
            run.ctx.attachment = error_attachment(exc, note)  # the last frames, on the journal entry
        return exc


_NO_CARRY: dict[str, Any] = {"carry": None, "save_carry": True}  # read only: a run that kept no carry


def _carry(run: Run) -> dict[str, Any]:
    value = run.ctx.carry
    if value is None:
        return _NO_CARRY  # None is JSON, and neither a carry schema nor the size bound applies to it
    schema = run.task_type.carry_schema if run.task_type else None
    bound = run.ctx.max_payload_bytes
    if schema is not None and value is not None:  # dump checks what it returns
        return {"carry": payloads.dump(schema, value, "carry", bound), "save_carry": True}
    return {"carry": payloads.ensure_json(value, "carry", bound), "save_carry": True}


def _pause(run: Run, result: Pause, carry: dict[str, Any]) -> FinishParams:
    until = result.until
    if until is not None and (not isinstance(until, datetime) or until.utcoffset() is None):
        return failure(run, f"Pause(until={until!r}) needs a timezone-aware datetime", carry=carry)
    note = note_text(result.note) if isinstance(result.note, str) else result.note
    return _finish(run, Outcome.PAUSED, note, visible_at=until, delay=result.delay, **carry)


UNSTORED_RESULT = "completed; its return value was not stored"
"""How the journal note of a run whose result could not be stored begins."""


def stored_result(value: Any, max_bytes: int = payloads.DEFAULT_MAX_PAYLOAD_BYTES) -> tuple[Any, str | None]:
    """A handler's return value as the JSON the job keeps, and None; or None and why it cannot be kept.

    Any value ``json.dumps`` accepts is a result, as ``json.dumps`` writes it
    (a tuple becomes an array, an integer key a string), within the queue's
    ``max_payload_bytes``.
    """
    what = "the handler's return value (the job's result)"
    try:
        return payloads.ensure_json(value, what, max_bytes), None
    except InvalidPayload as exc:
        problem = str(exc)
    try:
        return payloads.ensure_json(json.loads(json.dumps(value, allow_nan=False)), what, max_bytes), None
    except (TypeError, ValueError, RecursionError, InvalidPayload):
        return None, problem


def _result(run: Run, value: Any) -> FinishParams:
    """A returned JSON value: ``Complete`` with the value as the run's attachment (the job's result).

    The return value wins over an earlier ``ctx.set_attachment(...)``.  A
    value that cannot be stored still completes the job (the handler
    succeeded; a retry would repeat its effects): without a result, with a
    WARNING and a journal note saying why.
    """
    result, problem = stored_result(value, run.ctx.max_payload_bytes)
    note = None
    if problem is not None:
        note = note_text(f"{UNSTORED_RESULT}: {problem}")
        run.ctx.log.warning("job %s %s", run.job.id, note)
    elif run.ctx.attachment is not None:
        run.ctx.log.debug("the returned result replaces the attachment set with ctx.set_attachment()")
    run.ctx.attachment = result if problem is None else _safe_attachment(run)
    try:
        carry = _carry(run)
    except BaseException as exc:  # noqa: BLE001 - the carry schema is user code
        absorb(exc)
        return failure(run, f"cannot store carry: {exception_note(exc)}")
    return _finish(run, Outcome.COMPLETED, note, **carry)


def _outcome(run: Run, result: Any) -> FinishParams:
    if result is None:
        if run.ctx.carry is None:  # the common case, as Complete() would give it without building one
            return _finish(run, Outcome.COMPLETED, None, **_NO_CARRY)
        result = Complete()
    if not isinstance(result, RUN_OUTCOMES):
        return _result(run, result)
    try:
        carry = _carry(run)
    except BaseException as exc:  # noqa: BLE001 - the carry schema is user code
        absorb(exc)
        return failure(run, f"cannot store carry: {exception_note(exc)}")
    note = note_text(result.note) if isinstance(result.note, str) else result.note
    if isinstance(result, Complete):
        return _finish(run, Outcome.COMPLETED, note, **carry)
    if isinstance(result, Pause):
        return _pause(run, result, carry)
    if isinstance(result, Retry):
        if result.delay is not None and not isinstance(result.delay, timedelta):
            raise InvalidOutcome(f"Retry(delay={result.delay!r}) needs a timedelta")
        return failure(run, note or "retry requested", delay=result.delay, carry=carry)
    assert isinstance(result, Die)
    return _finish(run, Outcome.DEAD, note, **carry)


def classify(run: Run, result: Any) -> FinishParams:
    """Turn the handler's return value (or exception) into the validated row write to persist.

    Any other returned value is the job's result: the run is ``Complete``
    with the value as its attachment (see :func:`_result`; a value that
    cannot be stored completes without it).  An outcome whose values cannot
    be stored (a non-JSON carry or attachment, a note too long or with a
    NUL) becomes a retryable failure whose note says what was wrong.
    """
    suspended = run.ctx.suspension
    if suspended is not None and result is suspended:
        result = Pause(until=suspended.until, note=suspended.note)
    elif suspended is not None and not isinstance(result, BaseException):
        return failure(run, f"suspension swallowed: the handler caught Suspended ({suspended.note}) and returned")
    if isinstance(result, BaseException):
        return failure(run, exception_note(result))
    try:
        return _outcome(run, result)
    except InvalidOutcome as exc:
        run.ctx.log.warning("invalid outcome %s: %s", type(result).__name__, exc)
        return failure(run, f"invalid outcome {type(result).__name__}: {exc}")


def control(run: Run) -> FinishParams | None:
    """Step 4 of the pipeline: the outcome a cancel or a time limit that reached the run forces, else None.

    An operator's cancel ends it ``dead`` with the cancel note (no failure
    counted); a time limit makes it a retryable failure.  Either way its
    ``ctx.session`` work is rolled back with the outcome write.
    """
    state = run.ctx.cancel_state
    if not state.is_set:
        return None
    run.failed = True  # the handler's ctx.session work is rolled back with the outcome write
    note = note_text(state.note or "cancelled")
    if state.timed_out:
        run.ctx.log.warning("job %s run %d %s", run.job.id, run.job.run_count, note)
        return failure(run, note)
    return FinishParams(fence=run.fence, outcome=Outcome.DEAD, note=note)


def needs_wake(run: Run) -> bool:
    """Whether ``run`` suspended in a wait, so its outcome transaction runs :func:`wake` after the write."""
    return run.ctx.suspension is not None and wake_check(run.ctx, run.params) is not None


def wake(run: Run, params: FinishParams, recorded: Outcome) -> Callable[[Tx], None] | None:
    """The wake stage: ``call(tx)`` for a wait's ``paused`` as recorded, run after the fenced write.

    ``tx`` is the outcome transaction's handle: the store's own (the
    completer's single write, on any store) or the handler's session.

    The completer (and the testing drain) call it in the outcome's
    transaction, after the write that locked the job's row and before any
    outcome hook: a signal stored already wakes the job at once, else it
    stays invisible until the wait's deadline
    (:func:`venturi_sa.worker.durable.wake_check`).  A ``queue.signal``
    locks the row too, so a signal sent during the suspension is either
    seen here or sees the pause: on commit both the pause and the wake
    land, on rollback neither (the claim stands until its lease expires,
    and recovery runs the job again).  None when the run did not suspend in
    a wait, or ``recorded`` is not its ``paused`` (a stored cancel made it
    ``dead``: nothing to wake).
    """
    if run.ctx.suspension is None or recorded is not params.outcome:
        return None
    return wake_check(run.ctx, params)


def close_quietly(session: RunSession | None) -> None:
    """Close a run's session (rolling back what it did not commit), even if its connection is dead."""
    if session is not None:
        session.close()
