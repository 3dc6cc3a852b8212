"""Inline mode: enqueue runs the job at once in the caller's session."""

from __future__ import annotations

import warnings
from datetime import timedelta

import pytest
from sqlalchemy.orm import Session
from support.notes import notes

from venturi_sa import Queue
from venturi_sa.testing import InlineOutsideTests, InlineRunner, assert_enqueued, inline, refute_enqueued


def test_enqueue_runs_at_once_with_nested_enqueues(
        no_rows_left: None, venturi_queue_session: Session, venturi_queue: Queue, venturi_inline: InlineRunner) -> None:
    s, q = venturi_queue_session, venturi_queue
    job = q.enqueue(s, q.registry.get("spawn")(n=2))
    assert job.status == "completed"
    assert notes(s) == ["spawn 2", "spawn 1", "leaf"]
    assert [r.kind for r in venturi_inline.runs] == ["note", "spawn", "spawn"]  # innermost finishes first
    refute_enqueued(s, q)


def test_scheduled_jobs_and_other_pending_jobs_are_left_alone(
        venturi_queue_session: Session, venturi_queue: Queue) -> None:
    s, q = venturi_queue_session, venturi_queue
    Note = q.registry.get("note")
    before = q.enqueue(s, Note(body="before inline"))
    with inline(q):
        later = q.enqueue(s, Note(body="later"), delay=timedelta(hours=1))
        now = q.enqueue(s, Note(body="now"))
    assert (before.status, before.run_count, later.status, now.status) == ("pending", 0, "pending", "completed")
    assert notes(s) == ["now"]
    assert q.enqueue_hooks == []
    assert_enqueued(s, q, "note", count=2)


def test_a_raising_handler_raises_from_enqueue(venturi_queue_session: Session, venturi_queue: Queue) -> None:
    s, q = venturi_queue_session, venturi_queue
    with inline(q), pytest.raises(ValueError, match="boom"):
        q.enqueue(s, q.registry.get("boom")())
    assert_enqueued(s, q, "boom")  # pending, untouched
    with inline(q, fail_fast=False) as runner:
        job = q.enqueue(s, q.registry.get("boom")())
    assert (job.status, job.failure_count, runner.runs[0].note) == ("pending", 1, "ValueError: boom")


def test_inline_warns_outside_pytest(monkeypatch: pytest.MonkeyPatch, venturi_queue: Queue) -> None:
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    with pytest.warns(InlineOutsideTests, match="meant for tests"), inline(venturi_queue):
        pass
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "x")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with inline(venturi_queue):
            pass
