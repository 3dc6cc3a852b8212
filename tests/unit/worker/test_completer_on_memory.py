"""The completer on the memory backend: the batch writer, fenced-out writes, retries of a failed write."""

from __future__ import annotations

from support.memory_parts import Parts

from venturi_sa import JobContext, Outcome, Task
from venturi_sa.storage.params import Fence, FinishParams
from venturi_sa.worker.completer import Persist
from venturi_sa.worker.run import Run

WAIT = 10.0


class Noop(Task):
    KIND = "noop"

    def run(self, ctx: JobContext) -> None:
        return None


def claimed(parts: Parts, n: int) -> list[Run]:
    for _ in range(n):
        parts.store.add("noop")
    parts.producer.claim_round()
    runs = parts.dispatched[-n:]
    for run in runs:
        run.params = FinishParams(fence=run.fence, outcome=Outcome.COMPLETED, note="done")
    return runs


def test_the_batch_writes_every_handed_outcome_and_reports_each() -> None:
    parts = Parts([Noop], concurrency=5, batch=True)
    parts.completer.start()
    runs = claimed(parts, 5)
    assert [parts.completer.persist(run) for run in runs] == [Persist.HANDED_ON] * 5
    parts.completer.close(WAIT)  # flushes what was handed on
    assert sorted(parts.finished, key=lambda f: f[0].job.id) == sorted(((r, True) for r in runs),
                                                                       key=lambda f: f[0].job.id)
    assert all(parts.store.jobs[r.job.id].status == "completed" for r in runs)
    assert len(parts.store.journal) == 5


def test_a_fenced_out_outcome_is_refused_and_writes_nothing() -> None:
    parts = Parts([Noop], concurrency=2, batch=True)
    parts.completer.start()
    kept, lost = claimed(parts, 2)
    parts.store.jobs[lost.job.id].claimed_by = "someone-else"  # reclaimed elsewhere after its lease expired
    parts.completer.persist(kept)
    parts.completer.persist(lost)
    parts.completer.close(WAIT)
    assert dict((r.job.id, ok) for r, ok in parts.finished) == {kept.job.id: True, lost.job.id: False}
    assert parts.store.jobs[lost.job.id].status == "claimed" and parts.store.journal_of(lost.job.id) == []


def test_a_direct_write_is_refused_for_a_stale_run() -> None:
    parts = Parts([Noop])
    [run] = claimed(parts, 1)
    stale = FinishParams(fence=Fence(run.job.id, "noop", run.job.claimed_by, run.job.run_count + 1),
                         outcome=Outcome.COMPLETED)
    assert parts.completer.write(run, stale) is False
    assert parts.store.jobs[run.job.id].status == "claimed"


def test_a_failed_write_is_retried_while_the_lease_lasts() -> None:
    parts = Parts([Noop])
    [run] = claimed(parts, 1)
    assert run.params is not None
    parts.transactions.fail_next(2)
    assert parts.completer.write(run, run.params) is True
    assert parts.transactions.attempts == 3 and parts.store.jobs[run.job.id].status == "completed"
    assert parts.store.journal_of(run.job.id) == [(1, "completed")]  # the failed attempts wrote nothing


def test_release_gives_the_job_back_without_a_failure() -> None:
    parts = Parts([Noop])
    [run] = claimed(parts, 1)
    assert parts.completer.release(run, "released at shutdown")
    job = parts.store.jobs[run.job.id]
    assert (job.status, job.failure_count) == ("pending", 0)
    assert parts.store.journal_of(run.job.id) == [(1, "released")]
