"""Claiming: one round trip takes up to ``limit`` eligible jobs with SKIP LOCKED."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.states import Status
from venturi_sa.storage import driver_sql
from venturi_sa.storage.params import ClaimedJob, ClaimParams, Runner, SoonestParams
from venturi_sa.storage.pauses import claimable_kinds
from venturi_sa.storage.timeouts import own_timeout
from venturi_sa.storage.timestamps import INFINITY


def _lease_expr(models: Models, params: ClaimParams) -> Any:
    distinct = {params.leases.get(kind, params.default_lease) for kind in params.kinds}
    if len(distinct) == 1:
        return sa.literal(distinct.pop(), sa.Interval)
    whens = {kind: sa.literal(params.leases.get(kind, params.default_lease), sa.Interval)
             for kind in params.kinds}
    return sa.case(whens, value=models.Job.kind, else_=sa.literal(params.default_lease, sa.Interval))


_STATEMENTS: dict[tuple[Any, ...], Any] = {}

# Evaluated in RETURNING, so only when a row was claimed: the claim's COMMIT
# then returns before its WAL reaches disk.  A scalar subquery, so an
# InitPlan run once per claim (on its first row), not once per claimed row.  Safe: a claim lost in a server
# crash only returns its jobs to ``pending``; every outcome commit is
# synchronous and flushes the WAL (claim records included) first, and a run
# whose claim was lost finds its fence broken and commits nothing.
_RELAX_COMMIT: Any = sa.select(sa.literal_column("set_config('synchronous_commit', 'off', true)")
                               ).scalar_subquery().label("relaxed_commit")


_JSON_NULL: Any = sa.cast(sa.literal("null", sa.Text), postgresql.JSONB)


def claim_statement(models: Models, params: ClaimParams) -> Any:
    """The claim ``UPDATE``: one locking ``SELECT`` per group in a materialized CTE.

    Uncapped kinds form one group limited by ``limit``; each capped kind is a
    group of its own limited by its room.  The candidates of all groups are
    ordered by priority and age and the first ``limit`` are claimed, so a
    capped kind's high-priority jobs are never starved by an uncapped backlog
    (and vice versa).  Each materialized CTE runs its locking ``SELECT``
    exactly once, so the claim never takes more than it may.  The statement
    takes the bind parameters ``worker_id``, ``limit`` and ``cap_<i>``; it is
    built once per kinds/caps/leases shape and reused, so SQLAlchemy's
    compiled cache serves it.
    """
    leases = tuple(sorted((k, params.leases.get(k, params.default_lease)) for k in params.kinds))
    key = (models.prefix, id(models.Job), tuple(params.kinds), _capped(params), leases, params.default_lease,
           params.skip_overridden, params.probe)
    cached = _STATEMENTS.get(key)
    if cached is None:
        if len(_STATEMENTS) > 1000:
            _STATEMENTS.clear()
        # Default values, so that the statement compiles with its kinds rendered once (driver_sql);
        # every execution binds its own.
        cached = _STATEMENTS[key] = _build(models, params, sa.bindparam("limit", 0, type_=sa.Integer),
                                           sa.bindparam("worker_id", "", type_=sa.Text))
    return cached


def _capped(params: ClaimParams) -> tuple[str, ...]:
    return tuple(k for k in params.kinds if k in params.caps)


def _candidates(models: Models, kinds: Sequence[str], limit: Any, name: str, skip_overridden: bool) -> Any:
    job = models.Job
    return (
        sa.select(job.id, job.priority, job.created_at)
        .where(job.status == Status.PENDING.value, job.kind.in_(list(kinds)), job.visible_at <= sa.func.now(),
               claimable_kinds(models, kinds, skip_overridden=skip_overridden))  # paused kinds are left out
        .order_by(job.priority, job.created_at)
        .limit(limit)
        # FOR UPDATE, not FOR NO KEY UPDATE: a pending job a caller's transaction holds FOR KEY SHARE (an
        # after= parent, a signal, a cancel deciding on it) is skipped until that transaction ends.
        .with_for_update(skip_locked=True)
        .cte(name)
        .prefix_with("MATERIALIZED")
    )


def _picked(models: Models, params: ClaimParams, limit: Any, literal_caps: bool) -> Any:
    """The ids to claim: a scalar ``ARRAY(SELECT id ...)`` over the groups' candidates."""
    capped = _capped(params)
    uncapped = [k for k in params.kinds if k not in params.caps]
    if not capped:
        candidates = _candidates(models, uncapped, limit, "claimable", params.skip_overridden)
        return sa.func.ARRAY(sa.select(candidates.c.id).scalar_subquery())
    groups = [_candidates(models, uncapped, limit, "claimable", params.skip_overridden)] if uncapped else []
    for i, kind in enumerate(capped):
        room = params.caps[kind] if literal_caps else sa.bindparam(f"cap_{i}", 0, type_=sa.Integer)
        groups.append(_candidates(models, [kind], room, f"claimable_{i}", params.skip_overridden))
    grouped = sa.union_all(*(sa.select(g.c.id, g.c.priority, g.c.created_at) for g in groups)).subquery("grouped")
    best = sa.select(grouped.c.id).order_by(grouped.c.priority, grouped.c.created_at, grouped.c.id).limit(limit)
    return sa.func.ARRAY(best.scalar_subquery())


def _probed(models: Models, kinds: Sequence[str]) -> Any:
    """Those of ``kinds`` with a pending job visible now: an uncorrelated InitPlan, run once per claim.

    It leaves pauses and limits to the claim of those kinds (an index probe per kind on the claim index).
    """
    other = models.jobs_table.alias("probed_job")
    wanted = sa.func.unnest(sa.literal(list(kinds), postgresql.ARRAY(sa.Text))).table_valued("k")
    listed = wanted.render_derived(name="probed_kinds")
    waiting = sa.exists().where(other.c.status == Status.PENDING.value, other.c.kind == listed.c.k,
                                other.c.visible_at <= sa.func.now())
    return sa.select(sa.func.array_agg(listed.c.k)).where(waiting).scalar_subquery().label("probed")


def _build(models: Models, params: ClaimParams, limit: Any, worker_id: Any, literal_caps: bool = False) -> Any:
    job = models.Job
    probed = [_probed(models, params.probe)] if params.probe else []
    return (
        sa.update(job)
        # ANY(ARRAY(...)): primary-key lookups even on small tables, where a
        # join with the CTE would hash-join over a scan of every row.
        .where(job.id == sa.any_(_picked(models, params, limit, literal_caps)))
        .values(
            status=Status.CLAIMED.value,
            claimed_by=worker_id,
            run_count=job.run_count + 1,
            claim_expires_at=sa.func.now() + _lease_expr(models, params),
        )
        # A carry of JSON null comes back as SQL NULL (None either way, but the driver decodes no
        # JSON for it), the wait as a float8 (no Decimal made per row).
        .returning(job.id, job.kind, job.payload, sa.func.nullif(job.carry, _JSON_NULL).label("carry"),
                   job.priority, job.created_at, job.run_count, job.failure_count,
                   sa.cast(sa.func.extract("epoch", sa.func.now() - job.visible_at), sa.Float).label("waited"),
                   own_timeout(models).label("timeout"),  # an enqueue's timeout= (v6)
                   _RELAX_COMMIT, *probed)
        .execution_options(synchronize_session=False)
    )


def claim(models: Models, session: Runner, params: ClaimParams) -> list[ClaimedJob]:
    """Claim up to ``params.limit`` jobs in ``session`` (the caller commits at once).

    Rows come back in claim order: priority, then age, then id.
    """
    return claim_probing(models, session, params)[0]


def claim_probing(models: Models, session: Runner, params: ClaimParams) -> tuple[list[ClaimedJob], set[str] | None]:
    """:func:`claim`, and those of ``params.probe`` that had a pending job visible in the claim's snapshot.

    The look costs the claim statement an InitPlan, no statement of its
    own; it rides on the claimed rows, so with no row claimed it is None
    (unknown).  Nothing is claimed for the probed kinds.
    """
    if params.limit <= 0 or not params.kinds:
        return [], None
    binds: dict[str, Any] = {"limit": params.limit, "worker_id": params.worker_id}
    for i, kind in enumerate(_capped(params)):
        binds[f"cap_{i}"] = max(0, min(params.caps[kind], params.limit))
    statement = claim_statement(models, params)
    text = driver_sql.driver_text(session, statement, expand=True)
    if text is None:
        rows = session.execute(statement, binds).all()
    else:
        assert isinstance(session, sa.Connection)
        rows = driver_sql.execute(session, text[0], text[1], binds).all()
    worker_id = params.worker_id
    # Positional: the RETURNING columns of _build, in order (no per-attribute lookups on each row).
    jobs = [
        ClaimedJob(id=r[0], kind=r[1], payload=r[2], carry=r[3], priority=r[4], created_at=r[5], run_count=r[6],
                   failure_count=r[7], claimed_by=worker_id, waited=float(r[8]), timeout=r[9])
        for r in rows
    ]
    jobs.sort(key=_claim_order)
    probed = (set(rows[0][11] or ()) if rows else None) if params.probe else set()
    return jobs, probed


def _claim_order(job: ClaimedJob) -> tuple[int, datetime, str]:
    return job.priority, job.created_at, job.id


def seconds_until_visible(models: Models, session: Runner, params: SoonestParams) -> float | None:
    """Seconds from the database clock until the soonest future ``visible_at`` among ``kinds``.

    A statement of its own, read by a worker whose claim came back short,
    after it has handed the claimed jobs to their handlers.  It is not part
    of the claim: planning it (a ``min()`` over the ``_jobs_visible`` index)
    cost about as much as the rest of the claim's planning, on every claim.
    """
    if not params.kinds:
        return None
    job = models.Job
    soonest = (
        sa.select(job.visible_at)
        .where(job.status == Status.PENDING.value, job.kind.in_(list(params.kinds)), job.visible_at > sa.func.now(),
               job.visible_at < INFINITY)  # not waiting
        .order_by(job.visible_at)
        .limit(1)
        .scalar_subquery()
    )
    value = session.execute(sa.select(sa.func.extract("epoch", soonest - sa.func.now()))).scalar()
    return None if value is None else max(0.0, float(value))


def explain_claim(connection: sa.Connection, models: Models, params: ClaimParams, *, analyze: bool = False) -> str:
    """The ``EXPLAIN`` plan PostgreSQL would use for this claim (roll back afterwards).

    With ``analyze``, the claim runs (``EXPLAIN (ANALYZE, FORMAT JSON)``) and the
    plan, as JSON, carries each node's actual loops: roll back to undo the claim.
    """
    stmt = _build(models, params, params.limit, params.worker_id, literal_caps=True)
    compiled = stmt.compile(dialect=connection.dialect, compile_kwargs={"render_postcompile": True})
    verb = "EXPLAIN (ANALYZE, FORMAT JSON) " if analyze else "EXPLAIN "
    rows = connection.exec_driver_sql(verb + str(compiled), compiled.params)
    if analyze:
        plan = rows.scalar_one()  # drivers parse the json column, or hand over its text
        return plan if isinstance(plan, str) else json.dumps(plan)
    return "\n".join(str(row[0]) for row in rows)


__all__ = ["claim", "claim_probing", "claim_statement", "explain_claim", "seconds_until_visible"]
