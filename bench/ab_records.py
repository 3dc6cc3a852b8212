#!/usr/bin/env python
"""Same-run A/B of the worker's per-job Python objects (no database): two source trees, alternating.

    bench/.venv/bin/python bench/ab_records.py --a /tmp/venturi-base --b . --rounds 5

Each round times, in a child process on tree A then on tree B (``PYTHONPATH``
first), building what the worker builds per claimed job: a ``ClaimedJob`` and
its fence, then its context, checkpointer and ``Run`` (as ``Worker._dispatch``
does), a ``FinishParams``, and the outcome batch parameters of 100 outcomes
(``storage.outcomes._batch_columns``).  Prints per round µs per item (best of
7 repeats) and the medians; only the B ÷ A ratios mean anything on a shared
machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any


def _child() -> None:
    import inspect
    import timeit
    from datetime import datetime, timezone

    from venturi_sa.states import Outcome
    from venturi_sa.storage.outcomes import _batch_columns
    from venturi_sa.storage.params import ClaimedJob, FinishParams
    from venturi_sa.worker.checkpoint import Checkpointer
    from venturi_sa.worker.context import JobContext
    from venturi_sa.worker.joblog import job_log
    from venturi_sa.worker.run import Run

    now = datetime.now(timezone.utc)
    lazy_log = inspect.signature(JobContext).parameters["log"].default is None  # trees where the log is lazy

    def claimed() -> Any:
        job = ClaimedJob(id="01J00000000000000000000000", kind="noop", payload={"seq": 1}, carry=None,
                         priority=0, created_at=now, run_count=1, failure_count=0, claimed_by="worker-1",
                         waited=0.01, timeout=None)
        return job.fence

    def dispatched() -> Any:
        job = ClaimedJob(id="01J00000000000000000000000", kind="noop", payload={"seq": 1}, carry=None,
                         priority=0, created_at=now, run_count=1, failure_count=0, claimed_by="worker-1")
        ctx = JobContext(job, job.carry, None, None if lazy_log else job_log(job), None)  # type: ignore[arg-type]
        ctx.checkpointer = Checkpointer(job.fence, None, None, None)
        return Run(job=job, ctx=ctx)

    run = dispatched()

    def finished() -> Any:
        return FinishParams(fence=run.fence, outcome=Outcome.COMPLETED, carry=None, save_carry=True)

    batch = [finished() for _ in range(100)]
    items = {"ClaimedJob + fence": claimed, "dispatched run (job, context, checkpointer, Run)": dispatched,
             "FinishParams": finished, "outcome parameters, 100 rows": lambda: _batch_columns(batch)}
    out = {name: min(timeit.repeat(fn, number=2000, repeat=7)) / 2000 * 1e6 for name, fn in items.items()}
    print(json.dumps(out), flush=True)


def main(argv: list[str]) -> int:
    if argv[:1] == ["_child"]:
        _child()
        return 0
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", type=Path, required=True)
    p.add_argument("--b", type=Path, required=True)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args(argv)
    times: dict[str, dict[str, list[float]]] = {"A": {}, "B": {}}
    print("load " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    for r in range(a.rounds):
        for name, tree in (("A", a.a), ("B", a.b)):
            env = {**os.environ, "PYTHONPATH": str(tree.resolve()), "PYTHONDONTWRITEBYTECODE": "1"}
            res = subprocess.run([sys.executable, str(Path(__file__).resolve()), "_child"], env=env,
                                 capture_output=True, text=True, check=True)
            result = json.loads(res.stdout.splitlines()[-1])
            for item, us in result.items():
                times[name].setdefault(item, []).append(us)
            print(f"round {r + 1} {name}: " + ", ".join(f"{k} {v:.2f} µs" for k, v in result.items()), flush=True)
    for item in times["A"]:
        before, after = statistics.median(times["A"][item]), statistics.median(times["B"][item])
        print(f"{item}: A {before:.2f} µs, B {after:.2f} µs ({after / before:.2f}×)")
    print("load " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
