"""Firing due schedules: exactly one job per fire time, whatever the number of workers.

There is no leader.  Every worker of the queue runs a :class:`Firer`; each
fire is one short READ COMMITTED transaction of whichever worker gets there:

1. lock the soonest due schedule, ``FOR UPDATE SKIP LOCKED``, *due on the
   database clock* (``next_at <= statement_timestamp()``), so clock skew
   between workers does not matter and two workers never fire one schedule
   at once;
2. choose the fire times with the catch-up and overlap policies
   (:mod:`~venturi_sa.periodic.policies`);
3. write one ``_fires`` row per fire time, under the primary key
   ``(schedule, fire_at)``: a fire time that already has its row is not
   fired again (a second line of defence: steps 1 and 4 already prevent it);
   then insert the jobs of the fire times recorded (the enqueue INSERT, its
   ``NOTIFY`` delivered on commit);
4. advance ``next_at`` by compare-and-set on the value locked in step 1;
5. commit.

A worker that dies anywhere before the commit leaves nothing (PostgreSQL
rolls the transaction back and frees the row lock); the schedule is still
due and the next worker fires it.  After the commit the fire time is done
for everyone.  The claim statement is unchanged: fired jobs are ordinary
``pending`` rows.

One schedule's fault is its own: a schedule that cannot be fired (a stored
time zone this machine lacks, a cron expression that matches no date, a
row another service stored that this version cannot read) is rolled back,
logged at ERROR and left due; the :class:`Firer` then skips it for a
back-off that doubles from :data:`FAIL_BACKOFF` up to
:data:`MAX_FAIL_BACKOFF` seconds, while the other schedules keep firing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from venturi_sa.errors import VenturiError
from venturi_sa.models import Models, new_job_id
from venturi_sa.periodic.declare import ScheduledQueue
from venturi_sa.periodic.policies import parse_catch_up, select
from venturi_sa.periodic.timing import parse_spec
from venturi_sa.storage import schedules as verbs
from venturi_sa.storage.enqueue import InsertParams, NewJob, insert_jobs
from venturi_sa.storage.faults import is_transient

logger = logging.getLogger("venturi_sa.periodic")
ISOLATION = "READ COMMITTED"  # also venturi_sa.ops.schedules.FIRE_ISOLATION, the operator's run-now
DEFER_POLL = 1.0  # seconds between looks at a schedule waiting for its previous job (overlap="queue")
FAIL_BACKOFF = 1.0  # seconds a schedule that failed to fire is skipped for, doubled at each failure in a row
MAX_FAIL_BACKOFF = 300.0


class ScheduleMoved(VenturiError):
    """The compare-and-set on a schedule's next fire time found it changed: nothing was fired."""


@dataclass(frozen=True)
class Fired:
    """What one fire transaction did for one schedule."""

    name: str
    fires: list[tuple[datetime, str]] = field(default_factory=list)  # (fire time, job id)
    skipped: int = 0
    deferred: bool = False
    failed: str | None = None  # why the fire was rolled back (the schedule stays due), if it was


def _fire_locked(models: Models, session: Session, due: verbs.DueSchedule, notify: str | None) -> Fired:
    """Steps 2-4 for the schedule locked in ``due``, in the caller's transaction."""
    row = due.row
    timing = parse_spec(row.timing, row.tz)
    chosen = select(timing, parse_catch_up(row.catch_up), row.next_at, due.now)
    fire, skipped, next_at = chosen.fire, chosen.skipped, chosen.next_at
    if fire and row.overlap != "allow":
        if verbs.job_active(models, session, verbs.JobActiveParams(job_id=row.last_job)):
            if row.overlap == "queue":
                return Fired(row.name, deferred=True)  # nothing written: the fire time stays due
            fire, skipped = [], skipped + len(fire)
        elif len(fire) > 1:  # the later ones would overlap the first one's job
            if row.overlap == "queue":
                next_at = timing.after(fire[0])
            else:
                skipped += len(fire) - 1
            fire = fire[:1]
    job_ids: list[str] = []
    if fire:
        planned = [(t, new_job_id()) for t in fire]
        recorded = verbs.record_fires(models, session, verbs.RecordFiresParams(
            schedule=row.name, fires=[verbs.FireRecord(fire_at=t, job_id=j) for t, j in planned]))
        if len(recorded) < len(planned):  # only possible if next_at was moved back by hand
            logger.warning("schedule %s: %d fire time(s) had fired already; not fired again", row.name,
                           len(planned) - len(recorded))
        fire = [t for t, _ in planned if t in recorded]
        job_ids = [j for t, j in planned if t in recorded]
        jobs = [NewJob(id=j, kind=row.kind, payload=row.payload, priority=row.priority) for j in job_ids]
        if jobs:
            insert_jobs(models, session, InsertParams(jobs=jobs, notify_channel=notify))
    moved = verbs.advance(models, session, verbs.AdvanceParams(
        name=row.name, due=row.next_at, next_at=next_at, last_at=fire[-1] if fire else None,
        last_job=job_ids[-1] if job_ids else None, fired=len(fire), skipped=skipped))
    if not moved:
        raise ScheduleMoved(f"schedule {row.name!r} moved on while it was being fired")
    return Fired(row.name, list(zip(fire, job_ids, strict=True)), skipped)


@contextmanager
def _transaction(engine: sa.Engine) -> Iterator[Session]:
    """A Session in its own transaction at :data:`ISOLATION` (set on its connection), committed on exit."""
    with Session(engine, expire_on_commit=False) as session, session.begin():
        session.connection(execution_options={"isolation_level": ISOLATION})
        yield session


def _channel(queue: ScheduledQueue) -> str | None:
    return queue.models.names.channel if queue.notify else None


def fire_due(queue: ScheduledQueue, engine: sa.Engine, *, skip: Collection[str] = ()) -> list[Fired]:
    """Fire every schedule of ``queue`` due now but those named in ``skip``, one transaction each.

    Returns what each transaction did.
    Each schedule is fired at most once per call, so the call ends (and its
    results can be reported) even when schedules come due again as fast as
    they are fired; fire times one transaction did not take (a catch-up
    longer than a batch) are left due for the next call.  A fire that fails
    is rolled back, logged at ERROR with the reason, reported with
    :attr:`Fired.failed` and left due for the next pass, whatever the error
    (a bad stored time zone or cron expression included); the others go on.
    Transient database errors (the server gone), and any error raised before
    a schedule was locked, are raised for the caller to back off.
    """
    models, notify = queue.models, _channel(queue)
    results: list[Fired] = []
    passed: list[str] = list(skip)  # handled in this call, or skipped: not locked again
    while True:
        name = "?"
        try:
            with _transaction(engine) as session:
                due = verbs.lock_due(models, session, verbs.LockDueParams(exclude=passed))
                if due is None:
                    return results
                name = due.row.name
                result = _fire_locked(models, session, due, notify)
        except SQLAlchemyError as exc:
            if is_transient(exc) or name == "?":
                raise
            result = _failed(name, "the fire could not be inserted", exc)
        except ScheduleMoved as exc:
            logger.warning("%s; it stays due", exc)
            result = Fired(name, deferred=True)
        except Exception as exc:
            if name == "?":  # nothing locked: not one schedule's fault
                raise
            result = _failed(name, "cannot be fired", exc)
        passed.append(result.name)
        results.append(result)


def _failed(name: str, what: str, exc: Exception) -> Fired:
    """Log one schedule's failed fire at ERROR (traceback at DEBUG); the report of it."""
    lines = str(exc).splitlines()
    reason = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    logger.error("schedule %s: %s (%s); it stays due, the other schedules go on", name, what, reason)
    logger.debug("schedule %s: the fire's error", name, exc_info=exc)
    return Fired(name, deferred=True, failed=reason)


def seconds_until_due(queue: ScheduledQueue, engine: sa.Engine) -> float | None:
    """Seconds (database clock) until the soonest live schedule is due, or None if there is none."""
    with _transaction(engine) as session:
        return verbs.seconds_until_due(queue.models, session)


EventHook = Callable[[str, dict[str, Any]], None]


class Firer(threading.Thread):
    """A worker's firing thread: reconcile at start, then fire due schedules until ``stopping``.

    It sleeps until the soonest next fire time (read on the database clock,
    at most ``poll_interval``; :data:`DEFER_POLL` while a schedule waits for
    its previous job).  ``on_event`` gets ``schedule_fired`` and
    ``schedule_skipped`` with ``{"queue", "schedule", "count"}``.  A
    schedule whose fire failed is skipped for a back-off (see the module
    docstring); no error ends the thread before ``stopping``: each is
    logged at ERROR and the pass is tried again.  A queue
    declaring no schedules is reconciled (the stored schedules of its kinds
    are marked removed; those of kinds it does not register are left alone)
    and the thread ends.
    """

    def __init__(self, queue: ScheduledQueue, engine: sa.Engine, stopping: threading.Event, *,
                 poll_interval: float = 5.0, on_event: EventHook | None = None) -> None:
        super().__init__(name=f"venturi-firer-{queue.prefix}", daemon=True)
        self.queue = queue
        self.engine = engine
        self.stopping = stopping
        self.poll_interval = poll_interval
        self.on_event = on_event
        self.passes = 0
        self._backoff: dict[str, tuple[float, float]] = {}  # failed schedule -> (retry at, monotonic; delay)

    def run(self) -> None:
        from venturi_sa.periodic.reconcile import reconcile

        delay = 0.25
        while not self.stopping.is_set():
            try:
                reconcile(self.queue, self.engine)
                break
            except SQLAlchemyError as exc:
                logger.error("schedules of queue %s could not be reconciled: %s", self.queue.prefix,
                             str(exc).splitlines()[0])
            except Exception:
                logger.exception("schedules of queue %s could not be reconciled; trying again", self.queue.prefix)
            self.stopping.wait(delay)
            delay = min(delay * 2, self.poll_interval)
        if not self.queue.schedules:
            return
        while not self.stopping.is_set():
            self.stopping.wait(self._pass())

    def _pass(self) -> float:
        """One firing pass; returns how long to sleep."""
        now = time.monotonic()
        skip = [name for name, (retry_at, _) in self._backoff.items() if now < retry_at]
        try:
            results = fire_due(self.queue, self.engine, skip=skip)
            for result in results:
                self._report(result)
            soonest = seconds_until_due(self.queue, self.engine)
        except SQLAlchemyError as exc:
            logger.error("schedules could not be fired (%s); trying again", str(exc).splitlines()[0])
            return self.poll_interval
        except Exception:
            logger.exception("schedules of queue %s could not be fired; trying again in %.1fs", self.queue.prefix,
                             self.poll_interval)
            return self.poll_interval
        finally:
            self.passes += 1
        if soonest is None:
            return self.poll_interval
        if soonest <= 0:  # still due: more to catch up (go on), or deferred, failed or held by another worker
            return 0.005 if any(r.fires or r.skipped for r in results) else DEFER_POLL
        return max(0.005, min(self.poll_interval, soonest))

    def _report(self, result: Fired) -> None:
        if result.failed is not None:
            _, previous = self._backoff.get(result.name, (0.0, 0.0))
            delay = min(MAX_FAIL_BACKOFF, max(FAIL_BACKOFF, previous * 2))
            self._backoff[result.name] = (time.monotonic() + delay, delay)
        else:
            self._backoff.pop(result.name, None)
        for event, count in (("schedule_fired", len(result.fires)), ("schedule_skipped", result.skipped)):
            if count and self.on_event is not None:
                try:
                    self.on_event(event, {"queue": self.queue.prefix, "schedule": result.name, "count": count})
                except Exception:  # noqa: BLE001 - a broken hook must not stop firing
                    logger.exception("on_event hook failed")
        if result.skipped:
            logger.info("schedule %s: skipped %d fire time(s) by its catch-up/overlap policy", result.name,
                        result.skipped)


__all__ = ["DEFER_POLL", "FAIL_BACKOFF", "MAX_FAIL_BACKOFF", "Fired",
           "Firer", "ScheduleMoved", "fire_due", "seconds_until_due"]
