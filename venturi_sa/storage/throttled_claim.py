"""The throttled claim: one start per window per throttle key, and the claim's composition.

:func:`claim` is the one claim every claimer runs: throttled, around the
limited claim (:mod:`~venturi_sa.storage.limited_claim`, global, key and
rate limits), around the plain claim statement
(:mod:`~venturi_sa.storage.claim`).  ``SqlAlchemyBackend.claim`` runs it
with limits; ``venturi_sa.testing.drain`` runs it without (a drain ignores
limits), so neither rebuilds the layering.

The throttle (:func:`admit`, in the claim's transaction, only when the claim
took a throttled kind): one upsert records each throttled key's start in
``<prefix>_throttles``; it succeeds only where the key's last start is a
window old.  A claimed job whose key started more recently (a retry, a
re-claim, a job inserted beside another) is sent back in the same
transaction, exactly unclaimed (``pending``, ``run_count`` as it was) and
eligible at that start + the window, so it never runs; the claim then runs
again for the rest of the batch (:func:`claim_throttled`).  The upsert waits
on a concurrent claim's uncommitted start of the same key and then sees it,
so two claimers cannot both start a key.  Nothing here commits: a rollback
or a crash before the commit leaves neither the claim nor the start.  The
enqueue half of a throttle (a new job scheduled after its key's last start)
is :func:`venturi_sa.storage.merge_timing.hold`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.states import Status
from venturi_sa.storage import claim as claims
from venturi_sa.storage import limited_claim
from venturi_sa.storage.params import ClaimedJob, ClaimParams, Runner

SECOND: Any = sa.literal_column("interval '1 second'")

ClaimFn = Callable[[Models, Runner, ClaimParams], list[ClaimedJob]]


@dataclass(frozen=True, kw_only=True)
class AdmitParams:
    """A claim's runs of throttled kinds, checked against ``throttles`` (kind -> window)."""

    worker_id: str
    throttles: Mapping[str, timedelta]
    jobs: Sequence[ClaimedJob]


def _window_of(models: Models, throttles: Mapping[str, timedelta]) -> Any:
    """The throttle window of the start row's kind, as an interval (CASE over the claim's throttled kinds)."""
    kind = models.throttles_table.c.kind
    whens = [(kind == sa.literal(k, sa.Text), sa.literal(w.total_seconds(), sa.Float)) for k, w in throttles.items()]
    return sa.case(*whens) * SECOND


def admit(models: Models, runner: Runner, params: AdmitParams) -> list[ClaimedJob]:
    """Record the start of each throttled key claimed; send back the runs whose key started within its window.

    Returns ``params.jobs`` without the runs sent back.  One statement when
    every throttled key may start, a second to send back the others.  Runs
    in the claim's transaction (the caller commits it at once).
    """
    held = [j.id for j in params.jobs if j.kind in params.throttles]
    if not held:
        return list(params.jobs)
    jobs, starts = models.jobs_table, models.throttles_table
    job = jobs.c
    ids = sa.bindparam("held", held, type_=postgresql.ARRAY(sa.Text))
    rank = sa.func.row_number().over(partition_by=(job.kind, job.dedup_key),
                                     order_by=(job.priority, job.created_at, job.id))
    ranked = (sa.select(job.kind, job.dedup_key, job.id, rank.label("rank"))
              .where(job.id == sa.any_(ids), job.dedup_key.is_not(None)).subquery("ranked"))
    # The first job of each key in claim order; key order, so concurrent claimers lock start rows alike.
    firsts = (
        sa.select(ranked.c.kind, ranked.c.dedup_key, sa.func.now().label("began_at"), ranked.c.id.label("job_id"))
        .where(ranked.c.rank == 1)
        .order_by(ranked.c.kind, ranked.c.dedup_key)
    )
    insert = postgresql.insert(starts).from_select(["kind", "key", "began_at", "job_id"], firsts)
    upsert = insert.on_conflict_do_update(
        index_elements=[starts.c.kind, starts.c["key"]],
        set_={"began_at": insert.excluded.began_at, "job_id": insert.excluded.job_id},
        where=starts.c.began_at + _window_of(models, params.throttles) <= insert.excluded.began_at,
    ).returning(starts.c.job_id)
    started = {row[0] for row in runner.execute(upsert)}
    refused = [i for i in held if i not in started]
    if not refused:
        return list(params.jobs)
    start = starts.c
    back = (
        sa.update(jobs)
        .where(job.id == sa.any_(sa.bindparam("refused", refused, type_=postgresql.ARRAY(sa.Text))),
               job.status == Status.CLAIMED.value, job.claimed_by == params.worker_id,
               start.kind == job.kind, start["key"] == job.dedup_key)
        .values(status=Status.PENDING.value, claimed_by=None, claim_expires_at=None, run_count=job.run_count - 1,
                visible_at=sa.func.greatest(job.visible_at, start.began_at + _window_of(models, params.throttles)))
        .returning(job.id)
    )
    sent_back = {row[0] for row in runner.execute(back)}
    return [j for j in params.jobs if j.id not in sent_back]


def claim_throttled(models: Models, runner: Runner, params: ClaimParams,
                    claim: ClaimFn = claims.claim
                    ) -> list[ClaimedJob]:
    """``claim`` (by default the plain :func:`venturi_sa.storage.claim.claim`; a worker's obeys limits)
    with :func:`admit` for ``params.throttles``.

    When jobs were sent back, the claim runs again in the same transaction
    for the rest of the batch (caps reduced by what was kept): the jobs sent
    back are no longer eligible there, so a backlog of one key never leaves
    a claim short while other jobs wait.  Returns the kept runs in claim
    order; the caller commits at once.
    """
    kept: list[ClaimedJob] = []
    ask = params
    while True:
        jobs = claim(models, runner, ask)
        admitted = admit(models, runner, AdmitParams(worker_id=params.worker_id, throttles=params.throttles,
                                                     jobs=jobs)) if jobs else []
        kept += admitted
        remaining = params.limit - len(kept)
        if len(admitted) == len(jobs) or remaining <= 0:
            break
        taken = Counter(job.kind for job in kept)
        room = {kind: cap - taken[kind] for kind, cap in params.caps.items()}
        kinds = [kind for kind in params.kinds if room.get(kind, 1) > 0]
        if not kinds:
            break
        ask = replace(params, kinds=kinds, limit=remaining, caps={k: room[k] for k in kinds if k in room})
    kept.sort(key=lambda job: (job.priority, job.created_at, job.id))
    return kept


def claim(models: Models, runner: Runner, params: ClaimParams, *, limits: bool = True) -> list[ClaimedJob]:
    """Claim up to ``params.limit`` jobs: throttled (if ``params.throttles``), then limited, then plain.

    With ``limits`` False (a test's drain) the plain claim statement takes
    the place of the limited claim; the throttle still holds.  No statement
    beyond what each layer needs: a claim without throttles or limits is
    the plain statement alone.  Runs in the caller's transaction, which
    commits the claims (and the throttle starts) or rolls them all back.
    """
    inner: ClaimFn = limited_claim.claim if limits else claims.claim
    if params.throttles:  # one start per window per throttled key
        return claim_throttled(models, runner, params, inner)
    return inner(models, runner, params)


__all__ = ["AdmitParams", "ClaimFn", "admit", "claim", "claim_throttled"]
