"""Every path that ends a parent applies its dependents' policies in its own transaction; the guards."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session
from support.waiting import WAIT, wait_until
from support.workers import enqueue, job_row, journal

from venturi_sa import InvalidTransition, Queue, Task
from venturi_sa.states import Outcome
from venturi_sa.storage import claim as claims
from venturi_sa.storage import dependents, outcomes, recovery
from venturi_sa.storage.params import ClaimParams, FinishManyParams, FinishParams, RecoverParams


class Parent(Task):
    KIND = "parent"


class Child(Task):
    KIND = "child"


@pytest.fixture
def queue(models: Any) -> Queue:
    return Queue(models, [Parent, Child])


def _waiting(engine: sa.Engine, models: Any, job_id: str) -> bool:
    with engine.connect() as conn:
        return bool(conn.execute(sa.select(models.Job.visible_at == sa.literal("infinity", sa.DateTime(
            timezone=True))).where(models.Job.id == job_id)).scalar_one())


def _claim(engine: sa.Engine, models: Any, kind: str, limit: int = 10) -> list[Any]:
    with Session(engine) as s, s.begin():
        return claims.claim(models, s, ClaimParams(worker_id="w:1", kinds=[kind], limit=limit, leases={},
                                                   default_lease=timedelta(minutes=5)))


def _finish(engine: sa.Engine, models: Any, job: Any, outcome: Outcome) -> None:
    with Session(engine) as s, s.begin():
        outcomes.finish_many(models, s, FinishManyParams(outcomes=[FinishParams(fence=job.fence, outcome=outcome)]))


def test_kill_of_a_pending_parent_applies_each_policy(engine: sa.Engine, queue: Queue, models: Any) -> None:
    [p] = enqueue(engine, queue, Parent())
    [cancel] = enqueue(engine, queue, Child(), after=[p])
    [run] = enqueue(engine, queue, Child(), after=[p], if_parent_dead="run")
    queue.kill(engine, p)
    assert job_row(engine, models, cancel).status == "dead"
    [entry] = journal(engine, models, cancel)
    assert (entry.outcome, entry.run_no) == ("dead", 0) and p in entry.note
    assert job_row(engine, models, run).status == "pending" and not _waiting(engine, models, run)
    assert journal(engine, models, run) == []  # a release writes no journal row


def test_cancel_of_a_pending_parent_and_cancel_kind(engine: sa.Engine, queue: Queue, models: Any) -> None:
    p1, p2 = enqueue(engine, queue, Parent(), Parent())
    [c1] = enqueue(engine, queue, Child(), after=[p1])
    [c2] = enqueue(engine, queue, Child(), after=[p2])
    queue.cancel(engine, p1)
    assert job_row(engine, models, c1).status == "dead"
    assert job_row(engine, models, c2).status == "pending" and _waiting(engine, models, c2)
    queue.cancel_kind(engine, "parent")
    assert job_row(engine, models, c2).status == "dead"


def test_cancel_of_an_expired_claim_and_stale_recovery_at_the_backstop(engine: sa.Engine, queue: Queue,
                                                                         models: Any) -> None:
    p1, p2 = enqueue(engine, queue, Parent(), Parent())
    [c1] = enqueue(engine, queue, Child(), after=[p1])
    [c2] = enqueue(engine, queue, Child(), after=[p2])
    assert {j.id for j in _claim(engine, models, "parent")} == {p1, p2}
    with engine.begin() as conn:
        conn.execute(sa.update(models.jobs_table).values(claim_expires_at=sa.func.now() - timedelta(seconds=1)))
    queue.cancel(engine, p1)
    assert job_row(engine, models, c1).status == "dead"
    with Session(engine) as s, s.begin():
        [r] = recovery.recover(models, s, RecoverParams(max_failures={"parent": 1}))
    assert (r.id, r.dead) == (p2, True)
    assert job_row(engine, models, c2).status == "dead"


def test_completion_releases_with_the_delay_kept(engine: sa.Engine, queue: Queue, models: Any) -> None:
    [p] = enqueue(engine, queue, Parent())
    [c] = enqueue(engine, queue, Child(), after=[p], delay=timedelta(hours=1))
    [job] = _claim(engine, models, "parent")
    _finish(engine, models, job, Outcome.COMPLETED)
    row = job_row(engine, models, c)
    assert row.status == "pending" and row.visible_at > row.created_at + timedelta(minutes=59)
    assert queue.stats(engine).scheduled == 1


def test_cancel_with_dependents_kills_the_whole_chain_whatever_the_policy(engine: sa.Engine, queue: Queue,
                                                                          models: Any) -> None:
    [p] = enqueue(engine, queue, Parent())
    [b] = enqueue(engine, queue, Child(), after=[p], if_parent_dead="run")
    [c] = enqueue(engine, queue, Child(), after=[b], if_parent_dead="run")
    [other] = enqueue(engine, queue, Child())
    queue.cancel(engine, p, "stop", with_dependents=True)
    assert [job_row(engine, models, j).status for j in (p, b, c, other)] == ["dead", "dead", "dead", "pending"]
    assert "with its parent" in journal(engine, models, c)[-1].note


def test_edit_and_retry_now_are_refused_while_parents_are_unfinished(engine: sa.Engine, queue: Queue,
                                                                      models: Any) -> None:
    [p] = enqueue(engine, queue, Parent())
    [c] = enqueue(engine, queue, Child(), after=[p])
    with pytest.raises(InvalidTransition, match=p):
        queue.retry_now(engine, c)
    with pytest.raises(InvalidTransition, match="waits for 1 of its 1 parents"):
        queue.edit(engine, c, delay=timedelta(seconds=5))
    assert queue.edit(engine, c, priority=0).priority == 0
    assert _waiting(engine, models, c)


def test_requeue_re_arms_and_with_dependents_revives_what_its_death_killed(engine: sa.Engine, queue: Queue,
                                                                          models: Any) -> None:
    p, q = enqueue(engine, queue, Parent(), Parent())
    [waiting] = enqueue(engine, queue, Child(), after=[p, q], if_parent_dead="run")
    [killed] = enqueue(engine, queue, Child(), after=[p])
    [grandchild] = enqueue(engine, queue, Child(), after=[killed])
    queue.kill(engine, p)
    assert [job_row(engine, models, j).status for j in (killed, grandchild)] == ["dead", "dead"]
    queue.requeue(engine, p, with_dependents=True)
    for job_id in (waiting, killed, grandchild):
        assert job_row(engine, models, job_id).status == "pending" and _waiting(engine, models, job_id)
    [pj] = [j for j in _claim(engine, models, "parent") if j.id == p]
    _finish(engine, models, pj, Outcome.COMPLETED)
    assert not _waiting(engine, models, killed) and _waiting(engine, models, grandchild)
    assert _waiting(engine, models, waiting)  # q has not ended
    assert "waiting for 1 of 2 parents" in queue.explain(engine, waiting).reasons[0].text


def test_cleanup_and_the_archive_keep_a_parent_while_a_dependent_waits(engine: sa.Engine, queue: Queue,
                                                                      models: Any) -> None:
    p, q = enqueue(engine, queue, Parent(), Parent())
    [c] = enqueue(engine, queue, Child(), after=[p, q])
    [pj] = [j for j in _claim(engine, models, "parent", 1)]
    _finish(engine, models, pj, Outcome.COMPLETED)
    assert queue.archive(engine, older_than=timedelta(0)) == 0
    assert queue.cleanup(engine, older_than=timedelta(0)) == 0
    queue.kill(engine, q if pj.id == p else p)
    assert job_row(engine, models, c).status == "dead"
    assert queue.archive(engine, older_than=timedelta(0)) == 2  # the parents; the child owes its on_dead call


def test_the_last_two_parents_finishing_at_once_release_exactly_once(engine: sa.Engine, queue: Queue,
                                                                     models: Any) -> None:
    """Two outcome transactions, each the last for the other's view: the row lock serializes the count."""
    p1, p2 = enqueue(engine, queue, Parent(), Parent())
    [c] = enqueue(engine, queue, Child(), after=[p1, p2])
    jobs = {j.id: j for j in _claim(engine, models, "parent")}
    first_written = threading.Event()
    release_first = threading.Event()
    errors: list[BaseException] = []

    def first() -> None:
        try:
            with Session(engine) as s, s.begin():
                outcomes.finish_many(models, s, FinishManyParams(outcomes=[
                    FinishParams(fence=jobs[p1].fence, outcome=Outcome.COMPLETED)]))
                first_written.set()
                release_first.wait(WAIT)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=first)
    thread.start()
    assert first_written.wait(WAIT)
    second_done = threading.Event()

    def second() -> None:
        try:
            _finish(engine, models, jobs[p2], Outcome.COMPLETED)
            second_done.set()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    other = threading.Thread(target=second)
    other.start()
    wait_until(lambda: _blocked_on_lock(engine), what="the second outcome write waiting for the first's lock")
    assert not second_done.is_set() and _waiting(engine, models, c)
    release_first.set()
    thread.join(WAIT)
    other.join(WAIT)
    assert not errors and second_done.is_set()
    assert not _waiting(engine, models, c)
    with engine.connect() as conn:
        assert conn.execute(sa.select(models.workflow.waits_table.c.remaining)).scalar_one() == 0


def _blocked_on_lock(engine: sa.Engine) -> bool:
    with engine.connect() as conn:
        return bool(conn.execute(sa.text(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )).scalar_one())


def _plan_nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *(n for child in node.get("Plans", []) for n in _plan_nodes(child))]


def test_settling_jobs_without_dependents_never_reads_the_jobs_table(engine: sa.Engine, queue: Queue,
                                                                    models: Any) -> None:
    """An outcome batch's settle goes by the parents index: finished rows the statistics miss cost nothing.

    The statistics are taken while every job is pending, then most of them
    finish, as in a drain: a plan that looked the ids up by status would
    read every finished row of the table on every batch.
    """
    ids = enqueue(engine, queue, *[Parent() for _ in range(2000)])
    [child] = enqueue(engine, queue, Child(), after=[ids[0]])
    with engine.begin() as conn:
        conn.exec_driver_sql(f"ANALYZE {models.prefix}_jobs")
        conn.execute(sa.update(models.jobs_table).where(models.jobs_table.c.id.in_(ids[1:]))
                     .values(status="completed", finished_at=sa.func.now()))
    settle = dependents._statement(models, "settle", dependents._SETTLE, ids=dependents._IDS, channel=sa.Text)
    explain = sa.text("EXPLAIN (ANALYZE, FORMAT JSON) " + settle.text).bindparams(*settle._bindparams.values())
    with engine.begin() as conn:
        [[plan]] = conn.execute(explain, {"ids": ids[1:201], "channel": models.names.channel}).one()
        conn.rollback()
    read = [n for n in _plan_nodes(plan["Plan"]) if n.get("Relation Name") == f"{models.prefix}_jobs"
            and n["Node Type"] != "ModifyTable" and n["Actual Loops"] > 0]
    assert read == [], read
    [p] = _claim(engine, models, "parent", limit=1)  # the parent with a dependent, ended the usual way
    _finish(engine, models, p, Outcome.COMPLETED)
    assert not _waiting(engine, models, child)
