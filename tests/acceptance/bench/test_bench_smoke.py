"""Smoke run of the benchmark (bench/run.py) on a tiny workload.

Only venturi and the peers that need nothing beyond psycopg2 and SQLAlchemy
(raw_psycopg2, sqlalchemy_orm) run, against the test cluster.  The shared
harness (``../shared/bench`` beside the repository, or ``$PEERBENCH_HOME``)
is required; without it the test is skipped.  Asserts that every phase
produced a measurement, every worker stopped cleanly, and the reports were
written -- never how fast anything was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.paths import REPO

HARNESS = Path(os.environ.get("PEERBENCH_HOME") or REPO.parent / "shared" / "bench")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),  # whole benchmark runs, small as they are, on a loaded 2-core machine
    pytest.mark.skipif(not (HARNESS / "peerbench" / "orchestrator.py").exists(),
                       reason=f"shared peerbench harness not found at {HARNESS} (set PEERBENCH_HOME)"),
]


def test_bench_quick_run_measures_every_phase(pg_url: str, tmp_path: Path) -> None:
    url = sa.engine.make_url(pg_url)
    env = {**os.environ, "PEERBENCH_HOME": str(HARNESS)}
    if url.password:
        env["PGPASSWORD"] = str(url.password)
    cmd = [
        sys.executable, str(REPO / "bench" / "run.py"), "--quick", "--repeats", "1",
        "--systems", "venturi_sa,venturi_sa_psycopg,raw_psycopg2,sqlalchemy_orm",
        "--phases", "enqueue_one,enqueue_bulk,drain,latency,claim_cost",
        "--profiles", "default,tuned,tuned_p2,batch100_p1", "--n-one", "100", "--n-drain", "500",
        "--claim-sizes", "1000,3000", "--claim-pending", "300", "--claim-samples", "3",
        "--host", url.host or "127.0.0.1", "--port", str(url.port or 5432), "--user", url.username or "postgres",
        "--out", str(tmp_path),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=540, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]

    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    errors = [r for r in rows if r.get("value") is None]
    assert not errors, errors

    got = {(r["phase"], r["system"], r["profile"]) for r in rows}
    for key in [("enqueue_one", "venturi_sa", None), ("enqueue_bulk", "venturi_sa", None),
                ("drain", "venturi_sa", "default"), ("drain", "venturi_sa", "tuned"),
                ("drain", "venturi_sa", "tuned_p2"), ("drain", "venturi_sa_psycopg", "tuned"),
                ("latency", "venturi_sa_psycopg", "default"),
                ("latency", "venturi_sa", "default"), ("enqueue_one", "sqlalchemy_orm", None),
                ("enqueue_bulk", "raw_psycopg2", None), ("drain", "raw_psycopg2", "batch100_p1"),
                ("claim_cost", "venturi_sa", "claim1"), ("claim_cost", "venturi_sa", "claim100"),
                ("latency_floor", "floor", "default")]:
        assert key in got, f"missing measurement {key}"
    for r in rows:
        if r["phase"] == "drain":
            assert r["n"] == r["enqueued"] == 500 and not r["timed_out"], r
        if r["phase"] in ("drain", "latency"):
            assert r["worker_stop"] == "clean", r
        if r["phase"] in ("latency", "latency_floor"):
            assert r["received"] == r["n"], r
    plans = [r["plan"] for r in rows if r["phase"] == "claim_cost" and r.get("plan")]
    assert plans and all("bench_jobs_claim" in plan for plan in plans), plans

    report = json.loads((run_dir / "venturi.json").read_text())
    assert report["ratios"]["drain"]["default"]["raw_psycopg2/batch100_p1"] > 0
    assert {t["target"] for t in report["targets"]} >= {"wake-up latency p50, ms"}
    # the floor (bench/floor.py), once per repeat, and every round-3 target with this run's measurement
    (floor,) = report["latency_floor"]
    assert floor["p50"] > 0 and floor["claim"] > 0, floor
    round3 = {t["target"]: t for t in report["round3_targets"]}
    assert len(round3) == 7, round3
    for name in ("drain tuned, 1 process ÷ raw batch-100, 1 process", "wake-up p99, ms ≤ every peer's p99",
                 "wake-up p50 ÷ the floor's p50 (bench/floor.py)"):
        assert round3[name]["value"] is not None and round3[name]["met"] in (True, False), round3[name]
    summary = (run_dir / "summary.md").read_text()
    assert "venturi vs each peer" in summary and "claim cost vs terminal rows" in summary
    assert "## round 3 targets" in summary and "| floor |" in summary
    # venturi's supervisor ran the 2-process profile; the psycopg 3 system has its column and ratio
    assert "| venturi_sa | tuned_p2 | 2 |" in summary
    assert "| venturi_sa_psycopg ÷ psycopg2 |" in summary
    (tuned_row,) = [line for line in summary.splitlines() if line.startswith("| drain tuned, jobs/s |")]
    assert "—" not in tuned_row, tuned_row
    assert summary in proc.stdout
    for log in (run_dir / "logs").glob("*venturi_sa*.stderr"):
        assert "Traceback" not in log.read_text(), log.read_text()[-2000:]


def test_adverse_quick_run_measures_every_condition(pg_url: str, tmp_path: Path) -> None:
    """bench/adverse.py on a tiny workload (venturi only): one drain per condition, a ratio table."""
    url = sa.engine.make_url(pg_url)
    env = {**os.environ, "PEERBENCH_HOME": str(HARNESS)}
    if url.password:
        env["PGPASSWORD"] = str(url.password)
    cmd = [sys.executable, str(REPO / "bench" / "adverse.py"), "--quick", "--repeats", "1", "--systems", "venturi_sa",
           "--n", "100", "--terminal-rows", "1000", "--host", url.host or "127.0.0.1",
           "--port", str(url.port or 5432), "--user", url.username or "postgres", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=540, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = [json.loads(line) for line in (run_dir / "adverse.jsonl").read_text().splitlines()]
    assert {r["condition"] for r in rows} == {"clean", "terminal", "xmin", "poison", "procs8", "archived",
                                              "archived_xmin"}
    assert all(r["value"] > 0 and not r["timed_out"] for r in rows), rows
    for row in (r for r in rows if r["condition"].startswith("archived")):
        assert row["seeded"] == {**row["seeded"], "moved": 250, "copied": 750}, row  # 1,000: 250 moved, 3 copies
        assert row["bytes_seeded"]["bench_archive"] > 0 and row["bytes_drained"]["bench_jobs"] > 0, row
    text = (run_dir / "adverse.md").read_text()
    assert "| poison |" in text and "| archived_xmin |" in text and "bench_archive" in text
    for log in (run_dir / "logs").glob("*venturi_sa*.stderr"):
        if "-poison-" not in log.name:  # poison jobs raise on purpose, and their tracebacks are logged
            assert "Traceback" not in log.read_text(), log.read_text()[-2000:]
