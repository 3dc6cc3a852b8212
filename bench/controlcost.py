"""What runtime control costs the worker's hot paths: the claim and the lease renewal, against the statements before it.

"Before" is the source tree of an earlier commit (``--before``, default
``ea70ffe``: the last commit before migration v5 added pauses and cancel
requests), exported with ``git archive``; "now" is this tree.  A child
process per tree compiles its claim of 100 jobs (four kinds, one lease) and
its lease renewal to SQL text with their parameters, so both run through the
same ``exec_driver_sql`` path on the same connection pool.

One throwaway PostgreSQL (fsync off), two databases migrated to this tree's
head, each with ``--pending`` jobs of the four kinds:

* **unused**: no job has a time limit of its own and nothing is paused (what
  every queue that does not use the features runs);
* **used**: ``--limited`` of the jobs (default one in ten) have their own time
  limit (``<prefix>_timeouts``), four pause rows hold other kinds (one of them
  a kind pattern), and five of the renewed runs have a cancel request.

In each, the variants are timed interleaved sample by sample in a shuffled
order (every claim is rolled back, so all see the same rows), with an A/A
pair per statement as the noise floor.  Prints the medians and, per
statement, the median of the per-round ratios now / before (load drifts
between rounds on a shared machine; within a round both see the same), and
the planning and execution times PostgreSQL reports for each
(``EXPLAIN (ANALYZE)``: psycopg2 sends no prepared statements, so every
claim is planned afresh).
``python bench/controlcost.py [--samples N] [--pending N]
[--limited SHARE] [--before REV]``; ``--dump`` is the child's mode.
"""

from __future__ import annotations

import argparse
import os
import pickle
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
KINDS = ("k0", "k1", "k2", "k3")
LEASE = timedelta(seconds=60)
BEFORE = "ea70ffe"


def _params() -> Any:
    from venturi_sa.storage.params import ClaimParams

    return ClaimParams(worker_id="bench", kinds=list(KINDS), limit=100, leases={k: LEASE for k in KINDS},
                       default_lease=LEASE)


def _dump() -> None:
    """The child: this ``venturi_sa``'s claim and renewal as ``{name: (sql, params)}``, pickled to stdout."""
    from sqlalchemy.dialects.postgresql import psycopg2

    from venturi_sa import make_models
    from venturi_sa.storage import claim, leases

    dialect = psycopg2.dialect()  # type: ignore[no-untyped-call]
    models = make_models("bench")
    claimed = claim._build(models, _params(), 100, "bench", literal_caps=True).compile(
        dialect=dialect, compile_kwargs={"render_postcompile": True})
    renewal = leases._renew_statement(models).compile(dialect=dialect)
    pickle.dump({"claim": (claimed.string, dict(claimed.params)),
                 "renew": (renewal.string, dict(renewal.params))}, sys.stdout.buffer)


def _statements(tree: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, __file__, "--dump"], env=env, check=True, capture_output=True).stdout
    loaded: dict[str, tuple[str, dict[str, Any]]] = pickle.loads(out)
    return loaded


def _tree_of(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(HERE.parent), "archive", rev, "venturi_sa"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _populate(url: str, pending: int, limited: float, pauses: bool) -> Any:
    """Migrate, enqueue ``pending`` jobs (``limited`` of them with a time limit), pause; the renewal's binds."""
    import sqlalchemy as sa
    from sqlalchemy.dialects import postgresql
    from sqlalchemy.orm import Session

    import alembic_venturi
    from venturi_sa import Queue, Task, make_models
    from venturi_sa.storage import claim

    engine = sa.create_engine(url, pool_size=4)
    alembic_venturi.upgrade(engine, "bench")
    models = make_models("bench")
    queue = Queue(models, [type(f"T{k}", (Task,), {"KIND": k, "run": lambda self, ctx: None}) for k in KINDS])
    with Session(engine) as session, session.begin():
        for start in range(0, pending, 5000):
            batch = [queue.registry.get(KINDS[i % 4])() for i in range(start, min(start + 5000, pending))]
            cut = int(len(batch) * limited)
            if cut:
                queue.enqueue_many(session, batch[:cut], ids_only=True, timeout=timedelta(minutes=5))
            queue.enqueue_many(session, batch[cut:], ids_only=True)
    if pauses:
        for kind in ("other1", "other2", "other3", "other.*"):
            queue.pause(engine, kind, reason="bench")
    with engine.begin() as conn:  # 100 claims to renew, held by "bench"
        fences = [job.fence for job in claim.claim(models, conn, _params())]
    if pauses:
        with engine.begin() as conn:  # a few cancel requests among them
            conn.execute(postgresql.insert(models.cancels_table),
                         [{"job_id": f.job_id, "run_no": f.run_count, "actor": "bench"} for f in fences[:5]])
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE")
    return engine, {"held_ids": [f.job_id for f in fences], "held_runs": [f.run_count for f in fences],
                    "worker_id": "bench", "lease": LEASE}


def _timed(engine: Any, sql: str, params: dict[str, Any]) -> float:
    with engine.connect() as conn:
        trans = conn.begin()
        started = time.perf_counter()
        conn.exec_driver_sql(sql, params).all()
        elapsed = time.perf_counter() - started
        trans.rollback()
    return elapsed


def _scenario(engine: Any, renew_binds: dict[str, Any], trees: dict[str, dict[str, tuple[str, dict[str, Any]]]],
              samples: int) -> dict[str, list[float]]:
    runs: dict[str, tuple[str, dict[str, Any]]] = {}
    for tree, statements in trees.items():
        runs[f"claim {tree}"] = statements["claim"]
        sql, params = statements["renew"]
        runs[f"renew {tree}"] = (sql, {**params, **renew_binds})
    for verb in ("claim", "renew"):  # A/A pairs: the noise floor
        runs[f"{verb} now again"] = runs[f"{verb} now"]
    results: dict[str, list[float]] = {name: [] for name in runs}
    order = list(runs)
    shuffle = random.Random(15).shuffle
    for _ in range(samples):
        shuffle(order)  # no variant always follows another (a claim's rollback leaves work behind)
        for name in order:
            results[name].append(_timed(engine, *runs[name]))
    return results


def _server_times(engine: Any, runs: dict[str, tuple[str, dict[str, Any]]],
                  samples: int) -> dict[str, tuple[float, float]]:
    """Per run, the median planning and execution ms PostgreSQL reports (``EXPLAIN ANALYZE``, rolled back).

    Sampled in shuffled rounds, like the timings, so both trees see the same table state.
    """
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in runs}
    order = list(runs)
    shuffle = random.Random(16).shuffle
    for _ in range(samples):
        shuffle(order)
        for name in order:
            sql, params = runs[name]
            with engine.connect() as conn:
                [plan] = conn.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).scalar_one()
                conn.rollback()
            times[name][0].append(plan["Planning Time"])
            times[name][1].append(plan["Execution Time"])
    return {name: (statistics.median(p), statistics.median(e)) for name, (p, e) in times.items()}


def _paired(a: list[float], b: list[float]) -> float:
    """The median of the per-sample ratios a/b: both were timed in the same shuffled round."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def main() -> None:
    if sys.argv[1:] == ["--dump"]:
        _dump()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--pending", type=int, default=50_000)
    parser.add_argument("--limited", type=float, default=0.1, help="share of the jobs with their own time limit")
    parser.add_argument("--before", default=BEFORE, help="the commit whose statements are 'before'")
    args = parser.parse_args()

    import sqlalchemy as sa

    from venturi_sa.devtools.throwaway import ThrowawayCluster

    with tempfile.TemporaryDirectory() as tmp, ThrowawayCluster({"fsync": "off"}) as cluster:
        trees = {"before": _statements(_tree_of(args.before, Path(tmp))), "now": _statements(HERE.parent)}
        admin = sa.create_engine(cluster.url, isolation_level="AUTOCOMMIT")
        for name, limited, pauses in (("unused", 0.0, False), ("used", args.limited, True)):
            with admin.connect() as conn:
                conn.exec_driver_sql(f"CREATE DATABASE {name}")
            engine, renew_binds = _populate(sa.make_url(cluster.url).set(database=name), args.pending, limited, pauses)
            results = _scenario(engine, renew_binds, trees, args.samples)
            load = os.getloadavg()[0]
            print(f"## {name}: {args.pending} pending, {limited:.0%} with a time limit, "
                  f"{'4 pauses' if pauses else 'no pauses'}; load {load:.1f}")
            for run, values in results.items():
                print(f"{run}: median {statistics.median(values) * 1000:.3f} ms over {args.samples} samples")
            runs = {f"{verb} {tree}": (statements[verb][0], {**statements[verb][1], **renew_binds})
                    for tree, statements in trees.items() for verb in ("claim", "renew")}
            for name, (planning, execution) in _server_times(engine, runs, max(20, args.samples // 5)).items():
                print(f"{name}: server planning {planning:.3f} ms, execution {execution:.3f} ms (medians)")
            for verb in ("claim", "renew"):
                now, before, again = (results[f"{verb} {v}"] for v in ("now", "before", "now again"))
                print(f"{verb} ratio now/before: {_paired(now, before):.3f} (median of paired ratios; "
                      f"A/A noise {_paired(again, now):.3f})")
            engine.dispose()
        admin.dispose()


if __name__ == "__main__":
    main()
