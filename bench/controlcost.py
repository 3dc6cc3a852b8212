"""What runtime control costs the worker's hot paths: the claim and the lease renewal, same-run ratios.

One throwaway PostgreSQL, one queue (prefix ``bench``) with ``--pending`` jobs
of four kinds, ``--limited`` of them (default one in ten) with its own time
limit (``<prefix>_timeouts``, v6), and four open pause rows for other kinds, one of them a kind pattern (so
the claim's paused-kind filter has rows of both forms to read).  Then,
interleaved sample by sample so every variant sees the same server state (in
a shuffled order):

* **claim**: venturi's claim of 100 jobs (rolled back after each sample) as it
  is (v6: the paused-kind filter with kind patterns, and each claimed job's
  own time limit in ``RETURNING``); the v5 statement (exact-kind pauses only,
  no time-limit lookup, built by swapping ``storage.control._covers`` and
  ``storage.claim.own_timeout`` back); and the v3 statement (no paused-kind
  filter either: ``storage.control.claimable_kinds`` swapped for ``true``);
* **renewal**: the renewal of 100 held claims with the cancel-request join
  (v5) and without it (the v3 statement, rebuilt here).

Prints the medians and the ratios v6 / v5, v6 / v3 and v5 / v3.
``python bench/controlcost.py [--samples N] [--pending N] [--limited SHARE]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

import alembic_venturi
from venturi_sa import Queue, Task, make_models
from venturi_sa.storage import claim as claims
from venturi_sa.storage import control, leases
from venturi_sa.storage.params import ClaimParams
from venturi_sa.throwaway import ThrowawayCluster

KINDS = ("k0", "k1", "k2", "k3")


def _task(kind: str) -> type[Task]:
    return type(f"T{kind}", (Task,), {"KIND": kind, "run": lambda self, ctx: None})


def _v3_renew_statement(models: Any) -> Any:
    """The renewal statement before v5 (no cancel-request join), for the same-run ratio."""
    table, job = models.jobs_table, models.jobs_table.c
    held = leases._held_rows()
    mine = sa.and_(job.status == "claimed", job.claimed_by == sa.bindparam("worker_id", type_=sa.Text))
    locked = (sa.select(job.id).join(held, sa.and_(job.id == held.c.id, job.run_count == held.c.run_count))
              .where(mine).with_for_update(skip_locked=True, of=table).cte("locked").prefix_with("MATERIALIZED"))
    renewed = (sa.update(table).where(job.id.in_(sa.select(locked.c.id)))
               .values(claim_expires_at=sa.func.clock_timestamp() + sa.bindparam("lease", type_=sa.Interval))
               .returning(job.id).cte("renewed"))
    still = sa.exists().where(job.id == held.c.id, job.run_count == held.c.run_count, mine)
    return sa.select(held.c.id, held.c.run_count, renewed.c.id.is_not(None).label("renewed"),
                     still.label("ours")).select_from(held.outerjoin(renewed, renewed.c.id == held.c.id))


def _claim_statements(models: Any, params: ClaimParams) -> dict[str, Any]:
    """The claim as it is (v6), without the v6 additions (v5), and without the paused-kind filter too (v3)."""
    built = {"claim v6": claims.claim_statement(models, params)}
    covers, timeout, kinds = control._covers, claims.own_timeout, control.claimable_kinds
    try:
        control._covers = lambda m, kind: sa.or_(m.Pause.kind == kind, m.Pause.kind == control.ALL_KINDS)
        claims.own_timeout = lambda m: sa.null()  # type: ignore[attr-defined]
        claims._STATEMENTS.clear()
        built["claim v5"] = claims.claim_statement(models, params)
        claims.claimable_kinds = lambda m, kinds: sa.true()  # type: ignore[attr-defined]
        claims._STATEMENTS.clear()
        built["claim v3"] = claims.claim_statement(models, params)
    finally:
        control._covers, claims.own_timeout, claims.claimable_kinds = covers, timeout, kinds  # type: ignore[attr-defined]
        claims._STATEMENTS.clear()
    return built


def _timed(engine: sa.Engine, fn: Callable[[sa.Connection], Any]) -> float:
    with engine.connect() as conn:
        trans = conn.begin()
        started = time.perf_counter()
        fn(conn)
        elapsed = time.perf_counter() - started
        trans.rollback()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--pending", type=int, default=50_000)
    parser.add_argument("--limited", type=float, default=0.1, help="share of the jobs with their own time limit")
    args = parser.parse_args()
    with ThrowawayCluster({"fsync": "off"}) as cluster:
        engine = sa.create_engine(cluster.url, pool_size=4)
        alembic_venturi.upgrade(engine, "bench")
        models = make_models("bench")
        queue = Queue(models, [_task(k) for k in KINDS])
        with Session(engine) as session, session.begin():
            for start in range(0, args.pending, 5000):
                batch = [queue.registry.get(KINDS[i % 4])() for i in range(start, min(start + 5000, args.pending))]
                cut = int(len(batch) * args.limited)
                if cut:
                    queue.enqueue_many(session, batch[:cut], timeout=timedelta(minutes=5))
                queue.enqueue_many(session, batch[cut:])
        for kind in ("other1", "other2", "other3", "other.*"):
            queue.pause(engine, kind, reason="bench")
        params = ClaimParams(worker_id="bench", kinds=list(KINDS), limit=100,
                             leases={k: timedelta(seconds=60) for k in KINDS}, default_lease=timedelta(seconds=60))
        claim_runs = _claim_statements(models, params)
        claim_binds = {"limit": 100, "worker_id": "bench"}

        with engine.begin() as conn:  # 100 claims to renew, held by "bench"
            held = claims.claim(models, conn, params)
        fences = [j.fence for j in held]
        renew_binds = {"held_ids": [f.job_id for f in fences], "held_runs": [f.run_count for f in fences],
                       "worker_id": "bench", "lease": timedelta(seconds=60)}
        with engine.begin() as conn:  # a few cancel requests among them
            conn.execute(postgresql.insert(models.cancels_table),
                         [{"job_id": f.job_id, "run_no": f.run_count, "actor": "bench"} for f in fences[:5]])
        v5_renew, v3_renew = leases._renew_statement(models), _v3_renew_statement(models)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")

        claim_runs["claim v6 again"] = claim_runs["claim v6"]  # an A/A pair: the claim's noise floor
        runs = {**{name: (stmt, claim_binds) for name, stmt in claim_runs.items()},
                "renew v5": (v5_renew, renew_binds), "renew v3": (v3_renew, renew_binds),
                "renew v3 again": (v3_renew, renew_binds)}  # an A/A pair: the noise floor
        results: dict[str, list[float]] = {name: [] for name in runs}
        order = list(runs)
        shuffle = random.Random(15).shuffle
        for _ in range(args.samples):
            shuffle(order)  # no variant always follows another (a claim's rollback leaves work behind)
            for name in order:
                stmt, binds = runs[name]
                results[name].append(_timed(engine, lambda c, s=stmt, b=binds: c.execute(s, b).all()))
        medians = {name: statistics.median(values) * 1000 for name, values in results.items()}
        for name, value in medians.items():
            print(f"{name}: median {value:.3f} ms over {args.samples} samples")
        print(f"claim ratio v6/v5: {medians['claim v6'] / medians['claim v5']:.3f}")
        print(f"claim ratio v6/v3: {medians['claim v6'] / medians['claim v3']:.3f}")
        print(f"claim ratio v5/v3: {medians['claim v5'] / medians['claim v3']:.3f}")
        print(f"renew ratio v5/v3: {medians['renew v5'] / medians['renew v3']:.3f}")
        print(f"noise (claim v6 again / v6): {medians['claim v6 again'] / medians['claim v6']:.3f}")
        print(f"noise (renew v3 again / v3): {medians['renew v3 again'] / medians['renew v3']:.3f}")
        with engine.connect() as conn:
            print(claims.explain_claim(conn, models, params))
            conn.rollback()
        engine.dispose()


if __name__ == "__main__":
    main()
