"""The factories make rows that are valid and consistent for each state."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session


def test_job_traits_fill_dependent_columns(session: Session, models: Any, factories: Any) -> None:
    JobFactory, _ = factories
    jobs = {state: JobFactory(**{state: True}) for state in
            ("pending", "scheduled", "claimed", "expired", "completed", "dead")}
    session.commit()
    now = session.execute(sa.select(sa.func.now())).scalar_one()
    rows = {s: session.get(models.Job, j.id, populate_existing=True) for s, j in jobs.items()}
    assert rows["pending"].status == "pending" and rows["pending"].visible_at <= now
    assert rows["scheduled"].visible_at > now
    for state in ("claimed", "expired"):
        row = rows[state]
        assert (row.status, row.run_count) == ("claimed", 1) and row.claimed_by
    assert rows["claimed"].claim_expires_at > now > rows["expired"].claim_expires_at
    for state in ("completed", "dead"):
        row = rows[state]
        assert row.status == state and row.finished_at is not None and row.claimed_by is None
    assert all(len(r.id) == 26 for r in rows.values())


def test_journal_entries_belong_to_a_matching_job(session: Session, models: Any, factories: Any) -> None:
    JobFactory, JournalEntryFactory = factories
    entry = JournalEntryFactory()
    dead = JournalEntryFactory(dead=True)
    mine = JobFactory(kind="mine", claimed=True)
    retried = JournalEntryFactory(job=mine, retried=True)
    session.commit()
    assert session.get(models.Job, entry.job_id).status == "completed" and entry.outcome == "completed"
    assert session.get(models.Job, dead.job_id).status == "dead" and dead.outcome == "dead"
    assert (retried.job_id, retried.kind, retried.run_no, retried.outcome) == (mine.id, "mine", 1, "retried")
    assert JobFactory.create_batch(3, completed=True)[0].finished_at is not None
