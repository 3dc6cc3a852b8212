"""The storage seam: one :class:`Backend` protocol, one verb per state transition.

Every verb takes a *runner* (an ORM ``Session`` or a Core ``Connection`` in
the caller's transaction; the verb never commits) and one frozen keyword-only
params object, and returns plain data (or, for enqueue, the ``Job`` objects
the caller's session owns).  :class:`SqlAlchemyBackend` is the only
implementation for now; its SQL lives in the modules beside this one.  The
conformance suite (``tests/integration/conformance``) runs against the protocol, so a
second implementation is held to the same behaviour.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa.models import JobBase, Models
from venturi_sa.storage import (
    admin,
    checkpoint,
    claim,
    cleanup,
    control,
    dashboard,
    enqueue,
    history,
    leases,
    outcomes,
    schedules,
    stats,
    timeouts,
)
from venturi_sa.storage.params import (
    ClaimedJob,
    ClaimParams,
    Fence,
    FinishManyParams,
    RecoveredJob,
    RecoverParams,
    RenewParams,
    RenewResult,
    Runner,
    SoonestParams,
)


class Backend(Protocol):
    """What the queue needs from its storage.  Nothing here commits."""

    models: Models

    # -- the worker's verbs ---------------------------------------------------------
    def claim(self, runner: Runner, params: ClaimParams) -> list[ClaimedJob]:
        """Claim up to ``params.limit`` eligible jobs (SKIP LOCKED), in claim order."""

    def finish_many(self, runner: Runner, params: FinishManyParams) -> set[Fence]:
        """Write each run's fenced outcome and journal row; returns the fences that held."""

    def renew(self, runner: Runner, params: RenewParams) -> RenewResult:
        """Extend held leases without waiting on row locks; says which runs lost theirs."""

    def recover(self, runner: Runner, params: RecoverParams) -> list[RecoveredJob]:
        """Return expired claims of known kinds to ``pending`` (``dead`` at the backstop)."""

    def soonest_visible(self, runner: Runner, params: SoonestParams) -> float | None:
        """Seconds until the soonest future ``visible_at`` among the kinds, or None."""

    def ping(self, runner: Runner) -> None:
        """One round trip: raises if the database cannot be reached."""

    def checkpoint(self, runner: Runner, params: checkpoint.CheckpointParams) -> bool:
        """Save a running job's carry if its run still holds the claim (fenced); True if written."""

    # -- enqueue (the caller's session) -----------------------------------------------
    def insert_jobs(self, session: Session, params: enqueue.InsertParams) -> list[JobBase]:
        """Insert new jobs in one round trip (NOTIFY riding it); returns them as session objects."""

    def insert_rows(self, session: Session, params: enqueue.InsertParams) -> None:
        """Insert new jobs in one round trip (NOTIFY riding it) on the session's connection; loads nothing."""

    def lock_dedup(self, session: Session, params: enqueue.DedupLockParams) -> None:
        """Take the transaction-scoped advisory locks serializing dedup decisions (READ COMMITTED only)."""

    def find_merge_target(self, session: Session, params: enqueue.MergeTargetParams) -> JobBase | None:
        """The oldest pending job of a kind and dedup key, locked for the merge."""

    def record_merges(self, session: Session, params: enqueue.RecordMergesParams) -> None:
        """Write merged payloads and their ``merged`` journal rows in the caller's session."""

    # -- operations (read-only unless stated; the caller's transaction decides) ------
    def job_row(self, runner: Runner, params: history.JobParams) -> sa.Row[Any] | None:
        """One job's row, without locking it; None if there is no such job."""

    def job_view(self, runner: Runner, params: history.JobParams) -> sa.Row[Any] | None:
        """One job's row plus ``fire_schedule``, ``fire_at``, ``fired_at`` of the fire that inserted it (NULLs
        if no schedule did) and its own ``timeout`` (NULL if none), in one statement without locks; None if
        there is no such job."""

    def journal_rows(self, runner: Runner, params: history.JobParams) -> Sequence[sa.Row[Any]]:
        """One job's journal, oldest first (empty both for no entries and for no such job)."""

    def job_result(self, runner: Runner, params: history.JobParams) -> sa.Row[Any] | None:
        """``(status, result)``: the job's status and its last ``completed`` run's attachment; None if no job."""

    def history_page(self, runner: Runner, params: history.HistoryParams) -> Sequence[sa.Row[Any]]:
        """One keyset page of jobs, newest first (``limit + 1`` rows to tell if more follow)."""

    def stats(self, runner: Runner, params: stats.StatsParams) -> stats.StatsRows:
        """Counts by status and kind, eligible and scheduled pending, expired leases."""

    def cleanup_cutoff(self, runner: Runner, params: cleanup.CutoffParams) -> datetime:
        """``now() - older_than`` on the database clock."""

    def cleanup_count(self, runner: Runner, params: cleanup.CleanupParams) -> int:
        """How many terminal jobs a cleanup with ``params`` would delete now (the dry run)."""

    def cleanup_batch(self, runner: Runner, params: cleanup.CleanupParams) -> tuple[int, datetime | None]:
        """Delete one bounded batch of terminal jobs, skipping locked rows; (count, newest finished_at)."""

    def admin_apply(self, runner: Runner, params: admin.AdminParams) -> admin.AdminResult:
        """Lock the job, apply one operator transition if its status allows, and journal it."""

    # -- periodic jobs (the caller's transaction; see storage/schedules.py) ----------
    def lock_due_schedule(self, runner: Runner, params: schedules.LockDueParams) -> schedules.DueSchedule | None:
        """Lock one due live schedule (SKIP LOCKED; due on the database clock), or the named one."""

    def schedule_job_active(self, runner: Runner, params: schedules.JobActiveParams) -> bool:
        """Whether a schedule's previous job is still pending or claimed."""

    def record_fires(self, runner: Runner, params: schedules.RecordFiresParams) -> set[datetime]:
        """One row per (schedule, fire time) not fired before; returns the fire times recorded now."""

    def advance_schedule(self, runner: Runner, params: schedules.AdvanceParams) -> bool:
        """Compare-and-set the next fire time and count fires and skips; False if it moved meanwhile."""

    def reconcile_lock(self, runner: Runner) -> datetime:
        """Serialize schedule reconciliation for this queue; returns the database clock."""

    def schedule_rows(self, runner: Runner) -> Sequence[sa.Row[Any]]:
        """Every schedule row with its last job's status, by name."""

    def apply_reconcile(self, runner: Runner, params: schedules.ReconcileParams) -> None:
        """Insert, update and mark removed the schedules reconciliation decided on."""

    def set_schedule_paused(self, runner: Runner, params: schedules.PauseParams) -> bool:
        """Pause or resume a live schedule; False if there is none of that name."""

    def seconds_until_schedule(self, runner: Runner) -> float | None:
        """Seconds until the soonest live schedule is due (<= 0: due now), or None."""

    def fire_of(self, runner: Runner, params: schedules.FireOfParams) -> sa.Row[Any] | None:
        """The schedule and fire time that inserted a job, or None."""

    # -- runtime control (storage/control.py; the caller's transaction decides) -----------
    def pause_kind(self, runner: Runner, params: control.PauseParams) -> sa.Row[Any] | None:
        """Record a pause of a kind (closing an open one first); None if ``until`` is not in the future."""

    def resume_kind(self, runner: Runner, params: control.ResumeParams) -> sa.Row[Any] | None:
        """Close a kind's open pause (None if there was none) and NOTIFY the workers."""

    def pauses(self, runner: Runner, in_force_only: bool = True) -> list[sa.Row[Any]]:
        """Pause rows, newest first: those in force, or the whole record."""

    def pause_of(self, runner: Runner, kind: str) -> sa.Row[Any] | None:
        """The pause in force holding ``kind`` (its own, else the most specific pattern); None if none."""

    def cancel(self, runner: Runner, params: control.CancelParams) -> control.CancelResult:
        """Lock the job: a pending one ends dead (journaled), a claimed one gets a durable cancel request."""

    def cancel_candidates(self, runner: Runner, kind: str, limit: int) -> list[str]:
        """Ids of pending or claimed jobs of a kind, oldest first."""

    def edit_pending(self, runner: Runner, params: control.EditParams) -> control.EditResult:
        """Lock the job and, if it is pending, change it and journal the change."""

    def set_timeouts(self, runner: Runner, params: timeouts.TimeoutsParams) -> None:
        """Give new jobs of this transaction their own time limit (overriding ``Task.timeout``)."""

    def explain_facts(self, runner: Runner, job_id: str, activity_window: timedelta) -> control.ExplainFacts:
        """The facts ``explain`` turns into reasons (read-only)."""

    # -- the dashboard (read-only) ---------------------------------------------------------
    def dashboard_jobs(self, runner: Runner, params: dashboard.JobPageParams) -> dashboard.JobPage:
        """One filtered keyset page of jobs, newest first, reading at most ``params.scan`` rows."""

    def dashboard_counts(self, runner: Runner, params: dashboard.WindowParams) -> dashboard.OverviewCounts:
        """Live counts by kind, dead by kind, and jobs finished in the window by kind and status."""

    def dashboard_activity(self, runner: Runner, params: dashboard.WindowParams) -> Sequence[sa.Row[Any]]:
        """``(bucket, outcome, count)`` of the journal entries recorded in the window."""

    def dashboard_latency(self, runner: Runner, params: dashboard.WindowParams) -> Sequence[sa.Row[Any]]:
        """``(bucket, p50, p95, count)`` enqueue-to-completed seconds of jobs finished in the window."""

    def dashboard_job(self, runner: Runner, params: history.JobParams) -> dashboard.JobDetail:
        """One job's view row (its fire and own time limit too), its journal in order and the database clock
        (row None: no such job)."""

    def dashboard_workers(self, runner: Runner) -> tuple[Sequence[sa.Row[Any]], Sequence[sa.Row[Any]]]:
        """Claimed jobs grouped by ``claimed_by``, and the claimed jobs themselves (bounded)."""

    def dashboard_token(self, runner: Runner) -> tuple[Any, ...]:
        """A value that changes whenever a job is added or a journal row is written."""

    def dashboard_selection(self, runner: Runner, params: dashboard.SelectionParams) -> dict[str, tuple[str, str]]:
        """``{id: (kind, status)}`` of the given ids that exist (an action checks them before changing any)."""


class SqlAlchemyBackend:
    """The SQLAlchemy implementation of :class:`Backend` for one queue's models."""

    def __init__(self, models: Models) -> None:
        self.models = models

    def claim(self, runner: Runner, params: ClaimParams) -> list[ClaimedJob]:
        return claim.claim(self.models, runner, params)

    def finish_many(self, runner: Runner, params: FinishManyParams) -> set[Fence]:
        return outcomes.finish_many(self.models, runner, params)

    def renew(self, runner: Runner, params: RenewParams) -> RenewResult:
        return leases.renew(self.models, runner, params)

    def recover(self, runner: Runner, params: RecoverParams) -> list[RecoveredJob]:
        return leases.recover(self.models, runner, params)

    def soonest_visible(self, runner: Runner, params: SoonestParams) -> float | None:
        return claim.seconds_until_visible(self.models, runner, params)

    def ping(self, runner: Runner) -> None:
        runner.execute(sa.select(sa.literal(1)))

    def checkpoint(self, runner: Runner, params: checkpoint.CheckpointParams) -> bool:
        return checkpoint.write_checkpoint(self.models, runner, params)

    def insert_jobs(self, session: Session, params: enqueue.InsertParams) -> list[JobBase]:
        return enqueue.insert_jobs(self.models, session, params)

    def insert_rows(self, session: Session, params: enqueue.InsertParams) -> None:
        enqueue.insert_rows(self.models, session, params)

    def lock_dedup(self, session: Session, params: enqueue.DedupLockParams) -> None:
        enqueue.lock_dedup_keys(self.models, session, params)

    def find_merge_target(self, session: Session, params: enqueue.MergeTargetParams) -> JobBase | None:
        return enqueue.oldest_pending_sibling(self.models, session, params)

    def record_merges(self, session: Session, params: enqueue.RecordMergesParams) -> None:
        enqueue.record_merges(self.models, session, params)

    def job_row(self, runner: Runner, params: history.JobParams) -> sa.Row[Any] | None:
        return history.fetch_job(self.models, runner, params)

    def job_view(self, runner: Runner, params: history.JobParams) -> sa.Row[Any] | None:
        return history.fetch_job_view(self.models, runner, params)

    def journal_rows(self, runner: Runner, params: history.JobParams) -> Sequence[sa.Row[Any]]:
        return history.fetch_journal(self.models, runner, params)

    def job_result(self, runner: Runner, params: history.JobParams) -> sa.Row[Any] | None:
        return history.fetch_result(self.models, runner, params)

    def history_page(self, runner: Runner, params: history.HistoryParams) -> Sequence[sa.Row[Any]]:
        return history.fetch_history(self.models, runner, params)

    def stats(self, runner: Runner, params: stats.StatsParams) -> stats.StatsRows:
        return stats.read_stats(self.models, runner, params)

    def cleanup_cutoff(self, runner: Runner, params: cleanup.CutoffParams) -> datetime:
        return cleanup.db_cutoff(runner, params)

    def cleanup_count(self, runner: Runner, params: cleanup.CleanupParams) -> int:
        return cleanup.count_matching(self.models, runner, params)

    def cleanup_batch(self, runner: Runner, params: cleanup.CleanupParams) -> tuple[int, datetime | None]:
        return cleanup.delete_batch(self.models, runner, params)

    def admin_apply(self, runner: Runner, params: admin.AdminParams) -> admin.AdminResult:
        return admin.apply(self.models, runner, params)

    def lock_due_schedule(self, runner: Runner, params: schedules.LockDueParams) -> schedules.DueSchedule | None:
        return schedules.lock_due(self.models, runner, params)

    def schedule_job_active(self, runner: Runner, params: schedules.JobActiveParams) -> bool:
        return schedules.job_active(self.models, runner, params)

    def record_fires(self, runner: Runner, params: schedules.RecordFiresParams) -> set[datetime]:
        return schedules.record_fires(self.models, runner, params)

    def advance_schedule(self, runner: Runner, params: schedules.AdvanceParams) -> bool:
        return schedules.advance(self.models, runner, params)

    def reconcile_lock(self, runner: Runner) -> datetime:
        return schedules.reconcile_lock(self.models, runner)

    def schedule_rows(self, runner: Runner) -> Sequence[sa.Row[Any]]:
        return schedules.all_schedules(self.models, runner)

    def apply_reconcile(self, runner: Runner, params: schedules.ReconcileParams) -> None:
        schedules.apply_reconcile(self.models, runner, params)

    def set_schedule_paused(self, runner: Runner, params: schedules.PauseParams) -> bool:
        return schedules.set_paused(self.models, runner, params)

    def seconds_until_schedule(self, runner: Runner) -> float | None:
        return schedules.seconds_until_due(self.models, runner)

    def fire_of(self, runner: Runner, params: schedules.FireOfParams) -> sa.Row[Any] | None:
        return schedules.fire_of(self.models, runner, params)

    def pause_kind(self, runner: Runner, params: control.PauseParams) -> sa.Row[Any] | None:
        return control.pause(self.models, runner, params)

    def resume_kind(self, runner: Runner, params: control.ResumeParams) -> sa.Row[Any] | None:
        return control.resume(self.models, runner, params)

    def pauses(self, runner: Runner, in_force_only: bool = True) -> list[sa.Row[Any]]:
        return control.pauses(self.models, runner, in_force_only=in_force_only)

    def pause_of(self, runner: Runner, kind: str) -> sa.Row[Any] | None:
        return control.pause_of(self.models, runner, kind)

    def cancel(self, runner: Runner, params: control.CancelParams) -> control.CancelResult:
        return control.cancel(self.models, runner, params)

    def cancel_candidates(self, runner: Runner, kind: str, limit: int) -> list[str]:
        return control.non_terminal_ids(self.models, runner, kind=kind, limit=limit)

    def edit_pending(self, runner: Runner, params: control.EditParams) -> control.EditResult:
        return control.edit(self.models, runner, params)

    def set_timeouts(self, runner: Runner, params: timeouts.TimeoutsParams) -> None:
        timeouts.set_timeouts(self.models, runner, params)

    def explain_facts(self, runner: Runner, job_id: str, activity_window: timedelta) -> control.ExplainFacts:
        return control.explain_facts(self.models, runner, job_id, activity_window=activity_window)

    def dashboard_jobs(self, runner: Runner, params: dashboard.JobPageParams) -> dashboard.JobPage:
        return dashboard.fetch_job_page(self.models, runner, params)

    def dashboard_counts(self, runner: Runner, params: dashboard.WindowParams) -> dashboard.OverviewCounts:
        return dashboard.fetch_overview_counts(self.models, runner, params)

    def dashboard_activity(self, runner: Runner, params: dashboard.WindowParams) -> Sequence[sa.Row[Any]]:
        return dashboard.fetch_activity(self.models, runner, params)

    def dashboard_latency(self, runner: Runner, params: dashboard.WindowParams) -> Sequence[sa.Row[Any]]:
        return dashboard.fetch_latency(self.models, runner, params)

    def dashboard_job(self, runner: Runner, params: history.JobParams) -> dashboard.JobDetail:
        return dashboard.fetch_job_detail(self.models, runner, params.job_id)

    def dashboard_workers(self, runner: Runner) -> tuple[Sequence[sa.Row[Any]], Sequence[sa.Row[Any]]]:
        return dashboard.fetch_workers(self.models, runner)

    def dashboard_token(self, runner: Runner) -> tuple[Any, ...]:
        return dashboard.fetch_token(self.models, runner)

    def dashboard_selection(self, runner: Runner, params: dashboard.SelectionParams) -> dict[str, tuple[str, str]]:
        return dashboard.fetch_selection(self.models, runner, params)


@lru_cache(maxsize=256)
def backend_for(models: Models) -> Backend:
    """The backend of ``models`` (one per mapped-classes object)."""
    return SqlAlchemyBackend(models)
