"""factory-boy factories for one queue's ``Job`` and ``JournalEntry`` rows.

The mapped classes are made per prefix, so the factories are too::

    JobFactory, JournalEntryFactory = factories_for(models, session)
    job = JobFactory(claimed=True, kind="send")      # a consistent claimed row
    JobFactory.create_batch(10, completed=True)

Traits fill the dependent columns of each state consistently:

* ``pending`` (the default): visible now, never run;
* ``claimed``: ``claimed_by``, a live lease (database clock + 60 s), ``run_count >= 1``;
* ``expired``: a claimed row whose lease ran out a minute ago (what stale recovery looks for);
* ``completed`` / ``dead``: terminal, ``finished_at`` set, no claim left;
* ``scheduled``: pending but visible only in an hour.

``JournalEntryFactory`` makes a job for its entry (``job_state``, completed by
default) unless given one: ``JournalEntryFactory(job=job, retried=True)``;
its ``dead`` trait makes a dead job with a ``dead`` entry.

Times are SQL expressions on the database clock (``now()``), evaluated at
flush.  Rows are only flushed (``sqlalchemy_session_persistence="flush"``);
the test decides whether to commit.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import factory
import sqlalchemy as sa
from factory.alchemy import SQLAlchemyModelFactory
from sqlalchemy.orm import Session

from venturi_sa import Models


def db_now(offset: timedelta = timedelta(0)) -> Any:
    """``now() + offset`` as a SQL expression (database clock, evaluated at flush)."""
    if not offset:
        return sa.func.now()
    return sa.func.now() + sa.literal(offset, sa.Interval)


def factories_for(models: Models, session: Session) -> tuple[type[SQLAlchemyModelFactory],
                                                            type[SQLAlchemyModelFactory]]:
    """Return ``(JobFactory, JournalEntryFactory)`` bound to ``models`` and ``session``."""

    class JobFactory(SQLAlchemyModelFactory):
        class Meta:
            model = models.Job
            sqlalchemy_session = session
            sqlalchemy_session_persistence = "flush"

        kind = "noop"
        payload = factory.LazyFunction(dict)
        priority = 1
        status = "pending"
        run_count = 0
        failure_count = 0
        dedup_key = None

        class Params:
            pending = factory.Trait(status="pending")
            scheduled = factory.Trait(status="pending", visible_at=factory.LazyFunction(
                lambda: db_now(timedelta(hours=1))))
            claimed = factory.Trait(
                status="claimed",
                claimed_by=factory.Sequence(lambda n: f"factory-host:{90000 + n}"),
                claim_expires_at=factory.LazyFunction(lambda: db_now(timedelta(seconds=60))),
                run_count=1,
            )
            expired = factory.Trait(
                status="claimed",
                claimed_by=factory.Sequence(lambda n: f"ghost-host:{80000 + n}"),
                claim_expires_at=factory.LazyFunction(lambda: db_now(-timedelta(seconds=60))),
                run_count=1,
            )
            completed = factory.Trait(status="completed", run_count=1,
                                      finished_at=factory.LazyFunction(db_now))
            dead = factory.Trait(status="dead", run_count=1, failure_count=1,
                                 finished_at=factory.LazyFunction(db_now))

    class JournalEntryFactory(SQLAlchemyModelFactory):
        class Meta:
            model = models.JournalEntry
            sqlalchemy_session = session
            sqlalchemy_session_persistence = "flush"

        job_id = factory.LazyAttribute(lambda o: o.job.id)
        kind = factory.LazyAttribute(lambda o: o.job.kind)
        run_no = factory.LazyAttribute(lambda o: max(o.job.run_count, 1))
        outcome = "completed"
        note = None
        attachment = None

        class Params:
            job_state = "completed"  # the trait of the job made when no ``job`` is given
            job = factory.LazyAttribute(lambda o: JobFactory(**{o.job_state: True}))  # not a column
            retried = factory.Trait(outcome="retried", note="boom", job_state="claimed")
            dead = factory.Trait(outcome="dead", note="gave up", job_state="dead")

    return JobFactory, JournalEntryFactory


__all__ = ["db_now", "factories_for"]
