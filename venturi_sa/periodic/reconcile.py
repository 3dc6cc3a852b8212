"""Reconciling the schedules declared in code with the ``<prefix>_schedules`` table.

Each worker reconciles when it starts, in one transaction serialized by a
per-queue advisory lock: a declared schedule missing from the table is added
(first fire: its first fire time from now on the database clock); one whose
definition changed is updated (a new timing or zone starts again from now;
otherwise its next fire time is kept), and a removed one declared again is
revived from now; a stored schedule no longer declared is marked removed:
it stops firing, is logged, and stays listed (with its fire history) until
declared again.  Pausing is not part of the definition: a paused schedule
stays paused.  Commit applies all of it; a rollback or crash none of it.

**Authority**: a worker judges only the stored schedules whose kind its
queue registers.  One whose kind it does not know was declared by code it
does not run (another service sharing the prefix, a newer release), so it
is neither changed nor removed; a worker whose registered kinds have no
stored schedules and which declares none changes nothing.  Among the
schedules of its kinds, the workers should declare the same ones: the last
one to start decides.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa.periodic.declare import ScheduledQueue
from venturi_sa.periodic.timing import at_or_after
from venturi_sa.storage import schedules as schedules_store
from venturi_sa.storage.schedules import ReconcileParams

logger = logging.getLogger("venturi_sa.periodic")
DEFINITION = ("kind", "payload", "priority", "timing", "tz", "catch_up", "overlap")


@dataclass(frozen=True)
class Reconciled:
    """The names reconciliation added, changed (or revived), and marked removed."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def reconcile(queue: ScheduledQueue, engine: sa.Engine) -> Reconciled:
    """Make the stored schedules of ``queue``'s kinds match ``queue.schedules`` (see the module docstring).

    Returns what changed; stored schedules of kinds the queue does not
    register are left as they are.
    """
    models = queue.models
    report = Reconciled()
    with Session(engine) as session, session.begin():
        session.connection(execution_options={"isolation_level": "READ COMMITTED"})
        now = schedules_store.reconcile_lock(models, session)
        known = set(queue.registry.kinds)
        rows = {row.name: row for row in schedules_store.all_schedules(models, session)}
        insert: list[dict[str, Any]] = []
        update: dict[str, dict[str, Any]] = {}
        for schedule in queue.schedules:
            wanted = schedule.definition()
            row = rows.get(schedule.name)
            first = at_or_after(schedule.timing, now)
            if row is None:
                insert.append({"name": schedule.name, **wanted, "next_at": first})
                report.added.append(schedule.name)
                continue
            stored = {key: getattr(row, key) for key in DEFINITION}
            if stored == wanted and row.removed_at is None:
                continue
            columns: dict[str, Any] = {**wanted, "removed_at": None}
            retimed = (stored["timing"], stored["tz"]) != (wanted["timing"], wanted["tz"])
            if retimed or row.removed_at is not None:
                columns["next_at"] = first
            update[schedule.name] = columns
            report.changed.append(schedule.name)
        declared = {schedule.name for schedule in queue.schedules}
        report.removed.extend(name for name, row in rows.items()
                              if name not in declared and row.removed_at is None and row.kind in known)
        schedules_store.apply_reconcile(models, session,
                                        ReconcileParams(insert=insert, update=update, remove=report.removed))
    for name in report.removed:
        logger.warning("schedule %s of queue %s is no longer declared: it stops firing", name, queue.prefix)
    if report.added or report.changed:
        logger.info("schedules of queue %s reconciled: added %s, changed %s", queue.prefix,
                    ", ".join(report.added) or "none", ", ".join(report.changed) or "none")
    return report


__all__ = ["Reconciled", "reconcile"]
