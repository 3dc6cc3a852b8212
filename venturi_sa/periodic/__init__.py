"""Periodic jobs: cron and interval schedules fired exactly once per fire time, with no leader.

Declare with ``queue.schedule(Task(...), cron=..., tz=..., ...)`` or
``schedule = "<cron>"`` on a task type (:mod:`~venturi_sa.periodic.declare`);
fire times and the DST rule are in :mod:`~venturi_sa.periodic.timing`, the
catch-up and overlap policies in :mod:`~venturi_sa.periodic.policies`,
reconciliation at worker start in :mod:`~venturi_sa.periodic.reconcile`, the
firing transaction and the worker's firing thread in
:mod:`~venturi_sa.periodic.firing`.  Operate them through the queue
(``queue.list_schedules``, ``pause_schedule``, ``resume_schedule``,
``run_schedule_now``); ``list_schedules``, ``set_paused`` and ``run_now``
here are deprecated.  See docs/periodic.md.
"""

from __future__ import annotations

from venturi_sa.periodic.declare import Schedule, ScheduleSet
from venturi_sa.periodic.firing import Fired, Firer, fire_due
from venturi_sa.periodic.operations import FireInfo, ScheduleInfo, fired_by, list_schedules, run_now, set_paused
from venturi_sa.periodic.policies import all_within
from venturi_sa.periodic.reconcile import Reconciled, reconcile

__all__ = ["FireInfo", "Fired", "Firer", "Reconciled", "Schedule", "ScheduleInfo", "ScheduleSet", "all_within",
           "fire_due", "fired_by", "list_schedules", "reconcile", "run_now", "set_paused"]
