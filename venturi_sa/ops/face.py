"""The operations face: every operator action on jobs, kinds and schedules, as ``queue.<action>(engine, ...)``.

:class:`~venturi_sa.Queue` inherits :class:`Operations`.  Each operation
takes a sync ``Engine`` and opens its own short transaction(s) on it (never
the application's session): committed when it returns, rolled back on any
error; :meth:`~Operations.cancel` and :meth:`~Operations.signal` also take a
``Session`` and then join the caller's transaction (never commit), and the reads
of one job (``get_job``, ``explain``, ``result``, ``steps``, ``signals``,
``parents``) also take a ``Session`` or a ``Connection`` and then read in the
caller's transaction, seeing its uncommitted writes (never committing, rolling
back or closing it).  Each has an ``*_async`` twin taking an ``AsyncEngine`` (or
the async form of the ``Session`` or ``Connection`` its sync method takes), made by
:func:`~venturi_sa.ops.twins.async_twin` from the sync method itself, so its
guarantees are the sync ones word for word.  A sync object passed to an async
call, or the reverse, raises ``TypeError`` naming the call to use.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session

from venturi_sa import payloads
from venturi_sa.errors import InvalidOption
from venturi_sa.models import Models
from venturi_sa.ops import admin, cancel, cleanup, edit, history, pause, schedules, stats
from venturi_sa.ops import archive as archiving
from venturi_sa.ops import dependents as workflow
from venturi_sa.ops import job_sections as sections
from venturi_sa.ops import job_steps as durable
from venturi_sa.ops import limits as limit_ops
from venturi_sa.ops.cancel import Cancelled
from venturi_sa.ops.checks import DEFAULT_ACTOR
from venturi_sa.ops.dependents import DependentInfo, ParentInfo
from venturi_sa.ops.explain import Explanation, explain
from venturi_sa.ops.held_reasons import with_policy_reasons
from venturi_sa.ops.job_sections import JobSections, Starts
from venturi_sa.ops.limits import UNSET, Count, LimitInfo, Rated
from venturi_sa.ops.pause import PauseInfo
from venturi_sa.ops.records import JobInfo, JobView, JournalInfo, Page, ScheduleInfo, Stats
from venturi_sa.ops.twins import async_twin, joins_session, joins_transaction, nap, operation
from venturi_sa.task import Registry

log = logging.getLogger("venturi_sa.periodic")
ACTOR = DEFAULT_ACTOR


class Operations:
    """The operator actions on one queue's ``models``; :class:`~venturi_sa.Queue` is one.

    Built alone (``Operations(models)``) it acts on a queue's tables without
    registering a queue: what the dashboard does.  ``registry`` holds the
    task types whose ``on_dead`` a kill or cancel calls in its own
    transaction and whose schemas an edited payload must pass.
    ``archive_after`` is the queue's archiving delay (see :class:`~venturi_sa.Queue`).
    """

    def __init__(self, models: Models, registry: Registry | None = None, *, notify: bool = True,
                 max_payload_bytes: int = payloads.DEFAULT_MAX_PAYLOAD_BYTES,
                 archive_after: timedelta | None = archiving.DEFAULT_ARCHIVE_AFTER,
                 max_signals_per_job: int = durable.DEFAULT_MAX_SIGNALS,
                 max_signal_bytes_per_job: int = durable.DEFAULT_MAX_SIGNAL_BYTES) -> None:
        self.archive_after = archiving.check_archive_after(archive_after)
        """How long a terminal job stays in ``<prefix>_jobs`` before workers move it to the archive (None: never)."""
        self.models = models
        self.registry = registry if registry is not None else Registry(())
        self.notify = notify
        self.max_payload_bytes = payloads.check_max_bytes(max_payload_bytes)
        """The largest JSON (in bytes) this queue stores as a payload, carry, checkpoint, attachment or result."""
        self.signal_caps = durable.check_caps(max_signals_per_job, max_signal_bytes_per_job)
        """The most signals one job keeps, and the most bytes of their payloads (``queue.signal`` refuses more)."""

    # -- reading: one job, its journal, listings, counts ---------------------------------------

    @operation
    @joins_transaction
    def get_job(self, bind: Session | Connection | Engine, job_id: str) -> JobView:
        """The job's current row with ``fired_by`` and ``timeout`` (a :class:`~venturi_sa.JobView`), one statement.

        ``fired_by`` is the schedule fire that inserted it (None: no schedule
        did), ``timeout`` its own time limit (None: its task's applies).
        Read-only; ``JobNotFound`` if there is no such job.  With a ``Session``
        or ``Connection`` it reads in the caller's transaction (seeing its
        uncommitted writes; never committed, rolled back or closed); with an
        ``Engine``, in a short transaction of its own.
        """
        return history.get_job(self.models, bind, job_id)

    @operation
    def journal(self, engine: Engine, job_id: str) -> list[JournalInfo]:
        """The job's journal timeline, oldest first; ``JobNotFound`` if the job does not exist."""
        return history.journal(self.models, engine, job_id)

    @operation
    @joins_transaction
    def result(self, bind: Session | Connection | Engine, job_id: str, *, wait: float | None = None) -> Any:
        """The completed job's result: what its handler returned (its last ``completed`` run's attachment).

        ``JobNotFound`` if there is no such job; ``JobNotCompleted`` (with
        ``.status``) if it is not completed.  With ``wait`` seconds, polls the
        job row (every 50 ms, short read-only transactions) until it completes
        and raises ``TimeoutError`` when the time runs out; a ``dead`` job
        raises ``JobNotCompleted`` at once.  ``result_async`` waits with
        ``asyncio.sleep``, never blocking the event loop.  With a ``Session``
        or ``Connection`` it reads once in the caller's transaction (never
        committed); ``wait`` is then refused (``InvalidOption``): the job
        completes in a worker's transaction, which one open transaction does
        not see under REPEATABLE READ, and waiting would hold it open.
        """
        limit = history.check_wait(wait)
        if limit is not None and not isinstance(bind, Engine):
            raise InvalidOption(f"queue.result(wait=...) waits for a worker's commit, so it takes an Engine, "
                                f"not a {type(bind).__name__}: a job completing after your transaction began "
                                f"may never be seen inside it; read without wait, or wait on the engine")
        deadline = time.monotonic() + (limit or 0.0)
        while True:
            state = history.result_state(self.models, bind, job_id)
            if history.settled(self.models, job_id, state, waiting=limit is not None):
                return state[1]
            left = deadline - time.monotonic()
            if left <= 0:
                raise history.timed_out(self.models, job_id, limit or 0.0, state[0])
            nap(min(history.RESULT_POLL, left))

    @operation
    def history(self, engine: Engine, *, status: str | Sequence[str] | None = None, kind: str | None = None,
                finished_after: datetime | None = None, finished_before: datetime | None = None,
                limit: int = 50, cursor: str | None = None) -> Page:
        """Jobs newest first, keyset-paged by an opaque ``cursor`` (see :func:`venturi_sa.ops.history.history`)."""
        return history.history(self.models, engine, status=status, kind=kind, finished_after=finished_after,
                               finished_before=finished_before, limit=limit, cursor=cursor)

    @operation
    def stats(self, engine: Engine) -> Stats:
        """Counts by status and kind, eligible vs scheduled, in flight, dead, oldest eligible age."""
        return stats.stats(self.models, engine, self.registry)

    @operation
    @joins_transaction
    def explain(self, bind: Session | Connection | Engine, job_id: str) -> Explanation:
        """Why the job is not running, from the database (see :mod:`venturi_sa.ops.explain`).

        With a ``Session`` or ``Connection``: in the caller's transaction, at its isolation level (never committed).
        """
        return with_policy_reasons(explain(self.models, bind, job_id, registry=self.registry),
                                   self.registry)  # debounce, throttle

    # -- retention ------------------------------------------------------------------------------

    @operation
    @joins_transaction
    def parents(self, bind: Session | Connection | Engine, job_id: str) -> list[ParentInfo]:
        """The job's parents (``after=``) in order, with status, result and last note (see :meth:`get_job`'s bind)."""
        return workflow.parents(self.models, bind, job_id)

    @operation
    def dependents(self, engine: Engine, job_id: str) -> list[DependentInfo]:
        """The jobs that named this job in ``after=``, oldest first, with their status and policy."""
        return workflow.dependents(self.models, engine, job_id)

    @operation
    def cleanup(self, engine: Engine, *, before: datetime | None = None, older_than: timedelta | None = None,
                status: str | Sequence[str] | None = None, kind: str | None = None, batch_size: int = 1000,
                dry_run: bool = False, progress: Callable[[int], None] | None = None) -> int:
        """Delete terminal jobs finished before the cutoff in short batches (each committed); returns the count."""
        return cleanup.cleanup(self.models, engine, before=before, older_than=older_than, status=status,
                               kind=kind, batch_size=batch_size, dry_run=dry_run, progress=progress)

    @operation
    def archive(self, engine: Engine, *, older_than: timedelta | None = None, batch_size: int = 1000) -> int:
        """Move terminal jobs finished more than ``older_than`` ago (default: ``archive_after``, else 0) to the archive.

        Batches of ``batch_size``, each its own transaction; returns how many
        jobs moved (see :func:`venturi_sa.ops.archive.archive`).
        """
        after = older_than if older_than is not None else self.archive_after or timedelta(0)
        return archiving.archive(self.models, engine, older_than=after, batch_size=batch_size)

    # -- acting on one job ------------------------------------------------------------------------

    @operation
    def requeue(self, engine: Engine, job_id: str, note: str | None = None, *, actor: str = ACTOR,
                with_dependents: bool = False, reset_steps: bool = False) -> JobInfo:
        """Operator: ``dead`` -> ``pending`` now, with a fresh set of tries; journaled.

        ``with_dependents`` also requeues the dependents its death killed (docs/workflows.md).
        Recorded steps are kept (they replay); ``reset_steps=True`` deletes them with the requeue.
        """
        return admin.requeue(self.models, engine, job_id, note, actor, with_dependents, reset_steps)

    @operation
    def kill(self, engine: Engine, job_id: str, note: str | None = None, *, actor: str = ACTOR) -> JobInfo:
        """Operator: ``pending`` -> ``dead``; journaled (its task's ``on_dead`` in the same transaction)."""
        return admin.kill(self.models, engine, job_id, note, actor, self.registry)

    @operation
    def release(self, engine: Engine, job_id: str, note: str | None = None, *, actor: str = ACTOR) -> JobInfo:
        """Operator: ``claimed`` -> ``pending`` now, no failure counted (its worker is gone); journaled."""
        return admin.release(self.models, engine, job_id, note, actor)

    @operation
    @joins_session
    def cancel(self, bind: Session | Engine, job_id: str, note: str | None = None, *,
               actor: str = ACTOR, with_dependents: bool = False) -> Cancelled:
        """Cancel a job: pending ends ``dead`` now, claimed gets a durable cancel request for its run.

        With a ``Session`` it joins the caller's transaction (never commits);
        with an ``Engine`` it is its own short transaction.  See
        :func:`venturi_sa.ops.cancel.cancel`.  ``with_dependents`` cancels
        every transitive dependent too, whatever its policy, in the same
        transaction, even if the job itself has just ended (result
        ``"ended"``); with an ``Engine`` a deadlock is retried
        (:func:`venturi_sa.ops.dependents.cancel`).
        """
        if with_dependents:
            return workflow.cancel(self.models, bind, job_id, note, actor, self.registry)
        return cancel.cancel(self.models, bind, job_id, note, actor, self.registry)

    @operation
    def edit(self, engine: Engine, job_id: str, *, priority: int | None = None, run_at: datetime | None = None,
             delay: timedelta | None = None, run_now: bool = False, payload: Any = None, note: str | None = None,
             actor: str = ACTOR) -> JobInfo:
        """Change a pending job's priority, run time or payload (schema-validated); journaled."""
        return edit.edit(self.models, self.registry, engine, job_id, priority=priority, run_at=run_at,
                            delay=delay, run_now=run_now, payload=payload, note=note, actor=actor,
                            max_payload_bytes=self.max_payload_bytes)

    @operation
    def retry_now(self, engine: Engine, job_id: str, note: str | None = None, *, actor: str = ACTOR) -> JobInfo:
        """Make a pending job in backoff (or scheduled) eligible now; journaled."""
        return edit.retry_now(self.models, engine, job_id, note, actor)

    # -- kinds --------------------------------------------------------------------------------------

    @operation
    def cancel_kind(self, engine: Engine, kind: str, note: str | None = None, *,
                    actor: str = ACTOR) -> list[Cancelled]:
        """Cancel every pending or claimed job of ``kind``, in one transaction."""
        return cancel.cancel_kind(self.models, engine, kind, note, actor, registry=self.registry)

    @operation
    def pause(self, engine: Engine, kind: str, *, reason: str | None = None, until: datetime | None = None,
              delay: timedelta | None = None, actor: str = ACTOR) -> PauseInfo:
        """Pause ``kind`` (``"*"``: every kind) on every worker from commit on; persisted, with its reason."""
        return pause.pause(self.models, engine, kind, reason=reason, until=until, delay=delay, actor=actor)

    @operation
    def resume(self, engine: Engine, kind: str, *, actor: str = ACTOR) -> PauseInfo:
        """End ``kind``'s pause now; ``InvalidTransition`` if it is not paused."""
        return pause.resume(self.models, engine, kind, actor)

    @operation
    def pauses(self, engine: Engine, *, in_force_only: bool = True) -> list[PauseInfo]:
        """The pauses in force (or the recent record of pauses), newest first (read-only)."""
        return pause.pauses(self.models, engine, in_force_only=in_force_only)

    # -- limits across workers (docs/limits.md) ---------------------------------------------------

    @operation
    def set_limit(self, engine: Engine, kind: str, *, global_concurrency: Count = UNSET,
                  key_concurrency: Count = UNSET, rate_limit: Rated = UNSET, key_rate_limit: Rated = UNSET,
                  actor: str = ACTOR) -> list[LimitInfo]:
        """Override ``kind``'s limits from every worker's next claim after commit (omitted: unchanged, None: none)."""
        return limit_ops.set_limit(self.models, self.registry, engine, kind, {
            "global_concurrency": global_concurrency, "key_concurrency": key_concurrency,
            "rate_limit": rate_limit, "key_rate_limit": key_rate_limit}, actor)

    @operation
    def clear_limit(self, engine: Engine, kind: str, *names: str, actor: str = ACTOR) -> list[str]:
        """Remove ``kind``'s named overrides (all if none named), so the declared values apply again."""
        return limit_ops.clear_limit(self.models, engine, kind, names, actor)

    @operation
    def limits(self, engine: Engine) -> list[LimitInfo]:
        """Every limit in force (declared in this queue's tasks, or overridden) with its use (read-only)."""
        return limit_ops.limits(self.models, self.registry, engine)

    # -- schedules (docs/periodic.md) --------------------------------------------------------------

    @operation
    @joins_session
    def signal(self, bind: Session | Engine, job_id: str, name: str, payload: Any = None) -> durable.Signalled:
        """Send signal ``name`` with a JSON ``payload`` to a job: its ``ctx.wait_for(name)`` returns the payload.

        Locks the job row first.  A job suspended in that wait is woken
        (``"woke"``, its ``NOTIFY`` sent on commit); otherwise the signal is
        kept for the wait (``"stored"``); the same name and payload again is
        ``"duplicate"`` (nothing written).  With a ``Session`` it joins the
        caller's transaction (never commits; a rollback delivers nothing);
        with an ``Engine`` it is its own short transaction.  Raises
        ``SignalConflict`` (another payload under that name), ``TooManySignals``
        (past ``max_signals_per_job`` or ``max_signal_bytes_per_job``),
        ``InvalidTransition`` (a terminal job, or its wait timed out or
        its deadline has come on the database clock: nothing written) or
        ``JobNotFound``.  See :mod:`venturi_sa.ops.job_steps`.
        """
        return durable.signal(self.models, bind, job_id, name, payload, self.max_payload_bytes, self.signal_caps)

    @operation
    @joins_transaction
    def steps(self, bind: Session | Connection | Engine, job_id: str) -> list[durable.StepInfo]:
        """The job's recorded steps, sleeps and waits (``ctx.step`` ...), timed; read-only (bind: :meth:`get_job`)."""
        return durable.steps(self.models, bind, job_id)

    @operation
    def job_sections(self, engine: Engine, job_id: str, starts: Starts | None = None) -> JobSections:
        """A page of the job's journal (``merged`` runs folded), parents, dependents and steps, with counts and
        next-page cursors (see :mod:`venturi_sa.ops.job_sections`); read-only, one short transaction."""
        return sections.job_sections(self.models, engine, job_id, starts or Starts())

    @operation
    @joins_transaction
    def signals(self, bind: Session | Connection | Engine, job_id: str) -> list[durable.SignalInfo]:
        """The signals sent to the job, oldest first; read-only (a ``Session`` or ``Connection``: :meth:`get_job`)."""
        return durable.signals(self.models, bind, job_id)

    @operation
    def list_schedules(self, engine: Engine) -> list[ScheduleInfo]:
        """Every stored schedule, removed ones included, by name (read-only; what workers reconciled)."""
        return schedules.schedule_infos(self.models, engine)

    @operation
    def pause_schedule(self, engine: Engine, name: str, *, actor: str = ACTOR) -> None:
        """Stop schedule ``name`` firing from commit on, until resumed; ``VenturiError`` if there is none.

        The schedule row records no actor: ``actor`` is logged at INFO
        (``venturi_sa.periodic``) after the commit.
        """
        schedules.set_schedule_paused(self.models, engine, name, True)
        log.info("schedule %r of queue %r paused by %s", name, self.models.prefix, actor)

    @operation
    def resume_schedule(self, engine: Engine, name: str, *, actor: str = ACTOR) -> None:
        """Let schedule ``name`` fire again from its next fire time after now (the paused ones are not caught up).

        ``VenturiError`` if there is no such schedule; ``actor`` is logged as
        for :meth:`pause_schedule`.
        """
        schedules.set_schedule_paused(self.models, engine, name, False)
        log.info("schedule %r of queue %r resumed by %s", name, self.models.prefix, actor)

    @operation
    def run_schedule_now(self, engine: Engine, name: str) -> str:
        """Fire schedule ``name`` once now, outside its timing and policies; returns the job id.

        The job, its ``_fires`` row (fire time: the database clock now) and the
        schedule's last-job columns commit together; the next fire time does
        not move.  ``VenturiError`` if there is no live schedule of that name.
        """
        channel = self.models.names.channel if self.notify else None
        return schedules.run_now(self.models, engine, name, channel)

    # -- the same operations on an AsyncEngine: each the sync method above, in the greenlet bridge --

    get_job_async = async_twin(get_job)
    journal_async = async_twin(journal)
    result_async = async_twin(result)
    history_async = async_twin(history)
    stats_async = async_twin(stats)
    explain_async = async_twin(explain)
    parents_async = async_twin(parents)
    dependents_async = async_twin(dependents)
    cleanup_async = async_twin(cleanup)
    archive_async = async_twin(archive)
    requeue_async = async_twin(requeue)
    kill_async = async_twin(kill)
    release_async = async_twin(release)
    cancel_async = async_twin(cancel)
    edit_async = async_twin(edit)
    retry_now_async = async_twin(retry_now)
    cancel_kind_async = async_twin(cancel_kind)
    pause_async = async_twin(pause)
    resume_async = async_twin(resume)
    pauses_async = async_twin(pauses)
    set_limit_async = async_twin(set_limit)
    clear_limit_async = async_twin(clear_limit)
    limits_async = async_twin(limits)
    list_schedules_async = async_twin(list_schedules)
    pause_schedule_async = async_twin(pause_schedule)
    resume_schedule_async = async_twin(resume_schedule)
    run_schedule_now_async = async_twin(run_schedule_now)
    signal_async = async_twin(signal)
    steps_async = async_twin(steps)
    signals_async = async_twin(signals)
    job_sections_async = async_twin(job_sections)
