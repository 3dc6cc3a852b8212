"""The claim of limited kinds: global, per-key and rate limits, and fair turns across keys.

:func:`claim` is the backend's claim.  When none of its kinds declares a
limit or a limit key, or has a runtime override, it runs
:func:`venturi_sa.storage.claim.claim` alone: no other statement.  Which
kinds have overrides is read at most once a second; until then the claim
statement itself leaves out a kind overridden meanwhile (an InitPlan beside
the pause filter), so a new limit holds from every worker's next claim.
Otherwise the overrides of the limited kinds are read in the claim's
transaction, and each limited kind is claimed on its own, serialized across every claimer by a
transaction-scoped advisory lock per kind taken before anything is counted.
The lock is only tried, never waited for: a kind whose lock another
transaction holds is left out of this claim (the rest of the claim goes on)
and :func:`seconds_until_rate_slot` asks for another claim within
:data:`BUSY_RETRY`.  A transaction that took a lock is bounded by the
server: idle (its client frozen or gone) or waiting on a lock for
:data:`HOLD_TIMEOUT_MS`, it is ended, and the lock with it.

* use comes from the job rows (``status = 'claimed'``, past an expired lease
  too) and, for rates, from the sliding log of starts;
* one statement takes at most the kind's remaining budget (``LIMIT``) and,
  per key, at most the key's remaining budget (a row number per key);
* within a priority tier the claim goes round-robin across keys: the n-th
  job of every key before the (n+1)-th of any, keys whose last claim is
  oldest first (never claimed first), within a key the oldest job;
* a row locked by another transaction (an ``after=`` enqueue holds its
  parents ``FOR SHARE``) is skipped, never waited on: a keyed kind ranks
  without row locks, then locks what it picked ``SKIP LOCKED`` and ranks
  again without the rows it skipped (up to :data:`SKIP_ROUNDS` times);
* the other kinds follow in the ordinary claim statement with what is left
  of ``limit``;
* a limited kind whose last claim (taken first) found nothing is not taken
  first: the ordinary claim statement looks for a pending job of it visible
  now (an InitPlan, no statement of its own).  If it finds one, or claims no
  row to say whether it did, the kind is claimed right after it, the usual
  way (lock, budget, fair order), and first again from the next claim.  An
  idle limited kind so costs its worker's claims nothing while the other
  kinds have work; a kind whose budget is used up alternates between first
  and after, so a freed slot is taken within two claims.

Every claim is a start: the claimed rows' starts are logged (rate-limited
kinds only) and the log is pruned past :data:`~venturi_sa.declarations.limit_rules.MAX_RATE_WINDOW`,
the longest window a rate may have, so a window widened at runtime still
sees every start it covers.  Nothing here
commits; the lock goes with the claim's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.declarations.limit_rules import MAX_RATE_WINDOW, KindLimits, Rate
from venturi_sa.models import Models
from venturi_sa.states import Status
from venturi_sa.storage import claim as plain
from venturi_sa.storage import drivers
from venturi_sa.storage.claim import _lease_expr
from venturi_sa.storage.limits import effective_limits, overridden_kinds
from venturi_sa.storage.params import ClaimedJob, ClaimParams, Runner
from venturi_sa.storage.pauses import claimable_kinds
from venturi_sa.storage.timeouts import own_timeout

_LIMITED: dict[str, set[str]] = {}
"""Per prefix, the kinds this process has claimed as limited: their freed slots wake the other workers."""
_RATED: dict[str, dict[str, Rate]] = {}
"""Per prefix, the kind-wide rates in force at this process's last limited claim."""
_IDLE: dict[str, set[str]] = {}
"""Per prefix, the limited kinds whose last claim (taken first) found nothing: the plain statement looks first."""
_BUSY: dict[str, set[str]] = {}
"""Per prefix, the limited kinds whose lock was held elsewhere at this process's last claim of them."""
BUSY_RETRY = 0.05
"""Seconds after which a claim that left out a kind whose lock was held elsewhere asks again."""
HOLD_TIMEOUT_MS = 5000
"""A claim transaction holding a kind's lock is ended by the server once idle in transaction or waiting on a
lock this long (``idle_in_transaction_session_timeout``, ``lock_timeout``, set for that transaction only)."""
SKIP_ROUNDS = 4
"""How many times a keyed kind ranks again without the rows it found locked, within one claim."""
NO_KEY = ""
"""The bucket of the key None in the rate log and the fairness turns (a limit key is never empty)."""
_BIG = 2 ** 31 - 1


def claim(models: Models, runner: Runner, params: ClaimParams) -> list[ClaimedJob]:
    """Claim up to ``params.limit`` jobs, obeying every limit in force (see the module docstring)."""
    if params.limit <= 0 or not params.kinds:
        return []
    overridden = overridden_kinds(models, runner)
    slow = ([k for k in params.kinds if k in overridden or (k in params.limits and params.limits[k].any)]
            if overridden or params.limits else [])
    if not slow:  # the plain statement alone: it leaves out a kind overridden since the read above
        plain_params = params if params.skip_overridden else replace(params, skip_overridden=True)
        return plain.claim(models, runner, plain_params)
    rest = [k for k in params.kinds if k not in slow]
    rated = _RATED.get(models.prefix)
    if rated:
        for kind in rest:  # no longer limited: no rate to wait for
            rated.pop(kind, None)
    idle = _IDLE.setdefault(models.prefix, set())
    later = tuple(k for k in slow if k in idle) if rest else ()  # looked for by the plain statement first
    jobs = _claim_limited(models, runner, params, [k for k in slow if k not in later], params.limit, idle)
    if rest and len(jobs) < params.limit:
        got, found = plain.claim_probing(models, runner, replace(
            params, kinds=rest, limit=params.limit - len(jobs), skip_overridden=True, probe=later))
        jobs += got
        woken = set(later) if found is None else found  # no row claimed to say which: look at each
        idle.difference_update(woken)  # first again from the next claim
        if woken:
            jobs += _claim_limited(models, runner, params, [k for k in later if k in woken],
                                   params.limit - len(jobs), None)
    jobs.sort(key=lambda j: (j.priority, j.created_at, j.id))
    return jobs


def _claim_limited(models: Models, runner: Runner, params: ClaimParams, kinds: list[str], limit: int,
                   idle: set[str] | None) -> list[ClaimedJob]:
    """Claim up to ``limit`` jobs of the limited ``kinds``, one kind after another in name order.

    With ``idle``, a kind that was tried (its lock taken) and claimed
    nothing is added to it: later claims look for its work in the plain
    statement before they take the limited path for it again.
    """
    if not kinds or limit <= 0:
        return []
    limited = effective_limits(models, runner, kinds, params.limits)  # read in this transaction: never stale
    _LIMITED.setdefault(models.prefix, set()).update(limited)
    rated = _RATED.setdefault(models.prefix, {})
    for kind in kinds:
        rate = limited[kind].rate_limit if kind in limited else None
        if rate is None:
            rated.pop(kind, None)
        else:
            rated[kind] = rate
    busy = set(limited) - lock(models, runner, sorted(limited)) if limited else set()
    mine = _BUSY.setdefault(models.prefix, set())
    mine.difference_update(kinds)
    mine.update(busy)
    jobs: list[ClaimedJob] = []
    for kind in sorted(kinds):  # an overridden kind with no limit left in force: the same path, no budget
        room = min(limit - len(jobs), params.caps.get(kind, _BIG))
        if room > 0 and kind not in busy:  # another claimer holds its lock: the next claim tries again
            got = claim_kind(models, runner, params, kind, limited.get(kind, KindLimits()), room)
            jobs += got
            if idle is not None and not got:
                idle.add(kind)
    return jobs


def wake_if_limited(models: Models, runner: Runner, kinds: Iterable[str]) -> None:
    """NOTIFY the queue's workers on commit if one of ``kinds`` is limited: a slot was freed in this transaction.

    Called where the worker's runs leave ``claimed`` (outcomes, recovery);
    kinds this process never claimed as limited cost a set lookup.
    """
    limited = _LIMITED.get(models.prefix)
    if limited and not limited.isdisjoint(kinds):
        runner.execute(drivers.notify_statement(models.names.channel))


def seconds_until_rate_slot(models: Models, runner: Runner, kinds: Sequence[str]) -> float | None:
    """Seconds until a full rate window of ``kinds`` has room again (None: no rate is full).

    :data:`BUSY_RETRY` if the last claim left out one of ``kinds`` because
    another transaction held its lock.  The producer waits no longer than
    this when its claim came back short.
    """
    if not _BUSY.get(models.prefix, set()).isdisjoint(kinds):
        return BUSY_RETRY
    rated = [k for k in kinds if k in _RATED.get(models.prefix, {})]
    if not rated:
        return None
    start: Any = models.Limits.Start
    soonest: float | None = None
    for kind in rated:
        rate = _RATED[models.prefix][kind]
        # the limit-th newest start in the window: a claim is allowed again once it leaves
        nth = (sa.select(start.at).where(start.kind == kind, start.at > _since(rate.per))
               .order_by(start.at.desc()).offset(rate.limit - 1).limit(1))
        leaves = sa.select(sa.func.extract("epoch", nth.scalar_subquery()
                                           + sa.literal(rate.per, sa.Interval) - sa.func.statement_timestamp()))
        value = runner.execute(leaves).scalar()
        if value is not None:
            soonest = float(value) if soonest is None else min(soonest, float(value))
    return None if soonest is None else max(0.0, soonest)


def lock_key(models: Models, kind: str) -> str:
    return f"{models.prefix}:limit:{kind}"


def lock(models: Models, runner: Runner, kinds: list[str]) -> set[str]:
    """Try each kind's claim lock, never waiting; the kinds whose lock this transaction holds until it ends.

    When it took any, the transaction is bounded for its remaining life by
    :data:`HOLD_TIMEOUT_MS` (idle in transaction, or waiting on a lock): a
    frozen or vanished claimer's session is ended by the server, and its
    locks go with it.  One statement.
    """
    keys = {lock_key(models, k): k for k in kinds}
    listed = sa.func.unnest(sa.literal(sorted(keys), postgresql.ARRAY(sa.Text))
                            ).table_valued("k").render_derived(name="locks")
    limit = sa.literal(str(HOLD_TIMEOUT_MS), sa.Text)
    bound = sa.select(sa.func.set_config("idle_in_transaction_session_timeout", limit, True)
                      .op("||")(sa.func.set_config("lock_timeout", limit, True))).scalar_subquery()
    taken = runner.execute(sa.select(listed.c.k, bound).where(
        sa.func.pg_try_advisory_xact_lock(sa.func.hashtextextended(listed.c.k, 0))))
    return {keys[row[0]] for row in taken}


def _since(per: timedelta) -> Any:
    return sa.func.statement_timestamp() - sa.literal(per, sa.Interval)


def _budget(models: Models, kind: str, limits: KindLimits, room: int) -> Any:
    """The kind's remaining budget, counted in the claim statement (after the lock): a ``LIMIT`` expression."""
    job, start = models.Job, models.Limits.Start
    parts: list[Any] = [sa.literal(room, sa.Integer)]
    if limits.global_concurrency is not None:
        used = sa.select(sa.func.count()).where(job.status == Status.CLAIMED.value, job.kind == kind)
        parts.append(limits.global_concurrency - used.scalar_subquery())
    if limits.rate_limit is not None:
        started = sa.select(sa.func.count()).where(start.kind == kind,
                                                   start.at > _since(limits.rate_limit.per))
        parts.append(limits.rate_limit.limit - started.scalar_subquery())
    return sa.func.greatest(0, sa.func.least(*parts)) if len(parts) > 1 else parts[0]


def _key_room(models: Models, kind: str, limits: KindLimits, bucket: Any) -> Any:
    """Per key: how many more rows it may take (a correlated expression; large when no key limit)."""
    job, key, start = models.Job, models.Limits.Key, models.Limits.Start
    parts: list[Any] = []
    if limits.key_concurrency is not None:
        other, other_key = sa.orm.aliased(job), sa.orm.aliased(key)
        used = (sa.select(sa.func.count()).select_from(other).join(other_key, other_key.job_id == other.id)
                .where(other.status == Status.CLAIMED.value, other.kind == kind, other_key.key == bucket))
        parts.append(limits.key_concurrency - used.scalar_subquery())
    if limits.key_rate_limit is not None:
        started = sa.select(sa.func.count()).where(start.kind == kind, start.key == bucket,
                                                   start.at > _since(limits.key_rate_limit.per))
        parts.append(limits.key_rate_limit.limit - started.scalar_subquery())
    if not parts:
        return sa.literal(_BIG, sa.Integer)
    return sa.func.least(*parts) if len(parts) > 1 else parts[0]


def _unkeyed(models: Models, kind: str, limits: KindLimits, room: int) -> Any:
    """No keys to be fair across: the ids to claim in the claim index's order, up to the budget, locked."""
    job = models.Job
    plain_ids = (sa.select(job.id)
                 .where(job.status == Status.PENDING.value, job.kind == kind, job.visible_at <= sa.func.now(),
                        claimable_kinds(models, [kind]))
                 .order_by(job.priority, job.created_at).limit(_budget(models, kind, limits, room))
                 .with_for_update(skip_locked=True))
    return sa.func.ARRAY(plain_ids.scalar_subquery())


def _locked(models: Models, ids: list[str]) -> Any:
    """Those of ``ids`` still pending that no other transaction has locked, locked now (``SKIP LOCKED``)."""
    job = models.Job
    free = (sa.select(job.id).where(job.id == sa.any_(sa.literal(ids, postgresql.ARRAY(sa.Text))),
                                    job.status == Status.PENDING.value)
            .order_by(job.id).with_for_update(skip_locked=True))
    return sa.func.ARRAY(free.scalar_subquery())


def _fair(models: Models, kind: str, limits: KindLimits, room: int, skipped: Sequence[str]) -> Any:
    """The ids to claim, in fair order, at most the kind's budget and each key's, none of ``skipped``.

    Ranked without row locks (window functions and ``FOR UPDATE`` do not
    mix): the kind's lock keeps other claimers out, and :func:`_locked`
    then skips what another transaction holds.
    """
    job, key, turn = models.Job, models.Limits.Key, models.Limits.Turn
    bucket = sa.func.coalesce(key.key, NO_KEY)
    candidates = (
        sa.select(job.id, job.priority, job.created_at, bucket.label("bucket"), key.key.label("key"),
                  sa.func.row_number().over(partition_by=bucket, order_by=(job.priority, job.created_at, job.id))
                  .label("in_key"),
                  sa.func.row_number().over(partition_by=(job.priority, bucket), order_by=(job.created_at, job.id))
                  .label("in_tier"))
        .select_from(job).outerjoin(key, key.job_id == job.id)
        .where(job.status == Status.PENDING.value, job.kind == kind, job.visible_at <= sa.func.now(),
               claimable_kinds(models, [kind]),
               *([job.id != sa.all_(sa.literal(list(skipped), postgresql.ARRAY(sa.Text)))] if skipped else []))
        .subquery("candidates")
    )
    keyed = sa.select(candidates.c.bucket).distinct().where(candidates.c.key.is_not(None)).subquery("keyed")
    rooms = sa.select(keyed.c.bucket, _key_room(models, kind, limits, keyed.c.bucket).label("room")).subquery("rooms")
    room_of = sa.func.coalesce(rooms.c.room, _BIG)
    fair = (
        sa.select(candidates.c.id)
        .select_from(candidates.outerjoin(rooms, rooms.c.bucket == candidates.c.bucket)
                     .outerjoin(turn, sa.and_(turn.kind == kind, turn.key == candidates.c.bucket)))
        .where(candidates.c.in_key <= room_of)
        .order_by(candidates.c.priority, candidates.c.in_tier, turn.at.asc().nulls_first(),
                  candidates.c.bucket, candidates.c.created_at, candidates.c.id)
        .limit(_budget(models, kind, limits, room))
    )
    return fair


def claim_kind(models: Models, runner: Runner, params: ClaimParams, kind: str, limits: KindLimits,
               room: int) -> list[ClaimedJob]:
    """Claim at most ``room`` jobs of one limited kind (its lock held), log their starts and turns.

    A row another transaction has locked is skipped; a keyed kind then
    ranks again without it, for what is left of its budget.
    """
    if not limits.keyed:
        return _claim_ids(models, runner, params, kind, limits, _unkeyed(models, kind, limits, room))
    jobs: list[ClaimedJob] = []
    skipped: list[str] = []
    for _ in range(SKIP_ROUNDS):
        picked = list(runner.execute(_fair(models, kind, limits, room - len(jobs), skipped)).scalars())
        if not picked:
            break
        claimed = _claim_ids(models, runner, params, kind, limits, _locked(models, picked))
        jobs += claimed
        if len(claimed) == len(picked) or len(jobs) >= room:
            break
        taken = {job.id for job in claimed}
        skipped += [i for i in picked if i not in taken]  # locked elsewhere, or no longer pending
    return jobs


def _claim_ids(models: Models, runner: Runner, params: ClaimParams, kind: str, limits: KindLimits,
               ids: Any) -> list[ClaimedJob]:
    """Claim the pending rows of ``ids`` (an array expression), log their starts and turns."""
    job, key = models.Job, models.Limits.Key
    key_of = sa.select(key.key).where(key.job_id == job.id).scalar_subquery()
    stmt = (
        sa.update(job)
        .where(job.id == sa.any_(ids), job.status == Status.PENDING.value)
        .values(status=Status.CLAIMED.value, claimed_by=params.worker_id, run_count=job.run_count + 1,
                claim_expires_at=sa.func.now() + _lease_expr(models, replace(params, kinds=[kind])))
        .returning(job.id, job.kind, job.payload, job.carry, job.priority, job.created_at, job.run_count,
                   job.failure_count, sa.cast(sa.func.extract("epoch", sa.func.now() - job.visible_at), sa.Float),
                   own_timeout(models), key_of, sa.func.statement_timestamp())
        .execution_options(synchronize_session=False)
    )
    rows = runner.execute(stmt).all()
    if not rows:
        return []
    started = rows[0][11]
    buckets = sorted({r[10] if r[10] is not None else NO_KEY for r in rows})
    _record(models, runner, kind, limits, [r[10] if r[10] is not None else NO_KEY for r in rows], buckets, started)
    return [ClaimedJob(id=r[0], kind=r[1], payload=r[2], carry=r[3], priority=r[4], created_at=r[5],
                       run_count=r[6], failure_count=r[7], claimed_by=params.worker_id, waited=float(r[8]),
                       timeout=r[9]) for r in rows]


def _record(models: Models, runner: Runner, kind: str, limits: KindLimits, starts: list[str],
            buckets: list[str], started: Any) -> None:
    """Log the starts (rate-limited kinds), prune the log, and move the claimed keys' turns to now."""
    start: Any = models.Limits.Start
    turn: Any = models.Limits.Turn
    if limits.rate_limit is not None or limits.key_rate_limit is not None:
        # past the longest window a rate may have, not the one in force: a window widened later sees every start
        runner.execute(sa.delete(start).where(start.kind == kind, start.at <= started - MAX_RATE_WINDOW)
                       .execution_options(synchronize_session=False))
        runner.execute(sa.insert(start), [{"kind": kind, "key": b, "at": started} for b in starts])
    if limits.keyed:
        stmt = postgresql.insert(turn).values([{"kind": kind, "key": b, "at": started}
                                               for b in buckets])
        runner.execute(stmt.on_conflict_do_update(index_elements=["kind", "key"],
                                                  set_={"at": stmt.excluded.at}))
