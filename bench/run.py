#!/usr/bin/env python
"""venturi's benchmark: venturi and its peers, side by side, on a throwaway PostgreSQL.

    bash bench/setup.sh                       # once: bench/.venv with the peers + venturi
    bench/.venv/bin/python bench/run.py       # full run (~25 min): table, ratios, JSON
    bench/.venv/bin/python bench/run.py --quick --repeats 1     # smoke run (~2 min)

Starts its own PostgreSQL 15 cluster (durable: fsync and synchronous_commit
on; the shared harness's tuning), then drives the team's shared harness
``peerbench`` (default ``<repo>/../shared/bench``; ``--harness`` or
``$PEERBENCH_HOME``), imported at run time, never copied.  venturi's adapter
(``bench/venturi_adapter.py``) is registered into ``peerbench.registry`` at
run time, in this process and in every child (children run this file with
``_child``).  Phases: enqueue_one, enqueue_bulk, drain, latency, pgbench
(the harness's), claim_cost and adverse (ours: ``bench/claimcost.py``,
``bench/adverse.py``'s conditions for venturi and PgQueuer); the latency
phase also measures the machine's floor once per repeat (``bench/floor.py``:
a NOTIFY heard by a waiting connection plus one claim round trip) and prints
it beside every system's p50 and p99.  Systems:
venturi on psycopg2 (``venturi_sa``) and on every other driver
(``venturi_sa_psycopg``, ``venturi_sa_asyncpg``, ``venturi_sa_psycopg_async``)
beside the peers; drain profiles ``tuned_p2`` / ``tuned_p4`` run venturi's
supervisor with 2 and 4 processes.  Writes ``<out>/<stamp>/``:
``results.jsonl`` (every measurement), ``summary.md`` (tables) and
``venturi.json`` (ratios of venturi against each peer, the process-count,
per-driver and adverse-conditions tables, the latency floor, and the issue-17
and round-3 targets tables).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
ADAPTER_PATH = "venturi_adapter:VenturiSaAdapter"
DRIVER_SYSTEMS = ("venturi_sa_psycopg", "venturi_sa_asyncpg", "venturi_sa_psycopg_async")
DEFAULT_SYSTEMS = ",".join(("venturi_sa", *DRIVER_SYSTEMS, "raw_psycopg2", "sqlalchemy_orm", "pgqueuer",
                            "procrastinate", "beanqueue"))
DEFAULT_PHASES = "enqueue_one,enqueue_bulk,drain,latency,pgbench,claim_cost,adverse"
DEFAULT_PROFILES = "default,tuned,tuned_p2,tuned_p4,single_p1,single_p2,batch100_p1,batch100_p2"
OUR_PHASES = ("claim_cost", "adverse", "latency_floor")  # ours: rows of bench/claimcost.py, adverse.py, floor.py
FLOOR = ("latency_floor", "floor", "default")  # bench/floor.py's rows: (phase, system, profile)
# Durable cluster; the rest is the shared harness's RESULTS.md tuning.
PG_SETTINGS = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "shared_buffers": "512MB",
    "work_mem": "16MB",
    "maintenance_work_mem": "256MB",
    "effective_cache_size": "4GB",
    "max_wal_size": "4GB",
    "checkpoint_timeout": "15min",
    "wal_level": "replica",
    "max_connections": "300",
}


def find_harness(explicit: str | None = None) -> Path:
    """The shared harness dir: ``explicit``, ``$PEERBENCH_HOME`` or ``<repo>/../shared/bench``."""
    path = Path(explicit or os.environ.get("PEERBENCH_HOME") or REPO.parent / "shared" / "bench").resolve()
    if not (path / "peerbench" / "orchestrator.py").exists():
        raise SystemExit(f"peerbench harness not found at {path} (pass --harness or set PEERBENCH_HOME)")
    return path


def load_harness(path: Path) -> None:
    """Import ``peerbench`` from ``path`` and register venturi's adapter (this process only)."""
    sys.dont_write_bytecode = True  # the shared harness is read-only: leave no __pycache__ there
    for p in (str(BENCH_DIR), str(path)):
        if p not in sys.path:
            sys.path.insert(0, p)
    from peerbench import registry

    registry.ADAPTERS["venturi_sa"] = ADAPTER_PATH
    for system in DRIVER_SYSTEMS:  # venturi on psycopg 3, asyncpg, psycopg 3 async (venturi_adapter.DRIVER_SYSTEMS)
        registry.ADAPTERS[system] = f"venturi_adapter:{_driver_class(system)}"
    registry.ADAPTERS["venturi_sa_poison"] = "adverse_adapters:VenturiPoisonAdapter"  # bench/adverse.py
    registry.ADAPTERS["pgqueuer_poison"] = "adverse_pgqueuer:PgQueuerPoisonAdapter"


def _driver_class(system: str) -> str:
    """``venturi_sa_asyncpg`` -> ``VenturiAsyncpgAdapter`` (without importing the adapter, which needs peerbench)."""
    driver = system.removeprefix("venturi_sa_")
    return "Venturi" + "".join(part.capitalize() for part in driver.split("_")) + "Adapter"


def child_main(argv: list[str]) -> None:
    """Entry of the harness's subprocesses: register, then delegate to ``peerbench.child``."""
    load_harness(find_harness())
    from peerbench import child

    child.main(argv)


# ------------------------------------------------------------------------------ ratios
def _median(values: list[float]) -> float | None:
    import statistics

    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _by_key(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str | None], dict[int, dict[str, Any]]]:
    out: dict[tuple[str, str, str | None], dict[int, dict[str, Any]]] = {}
    for r in rows:
        if r.get("value") is not None and r["phase"] not in OUR_PHASES:
            out.setdefault((r["phase"], r["system"], r["profile"]), {})[r["run"]] = r
    return out


def _ratio(a: dict[int, dict[str, Any]], b: dict[int, dict[str, Any]], field: str = "value") -> float | None:
    """Median over runs of a/b, same-run pairs only."""
    return _median([a[r][field] / b[r][field] for r in a if r in b and b[r][field]])


def ratio_tables(rows: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """venturi vs every other (system, profile) per phase; same-run ratios, medians."""
    keys = _by_key(rows)
    lines: list[str] = ["## venturi vs each peer (same-run ratios, median over runs)\n"]
    data: dict[str, Any] = {}
    for phase, field, better in (("enqueue_one", "value", "higher"), ("enqueue_bulk", "value", "higher"),
                                 ("drain", "value", "higher"), ("latency", "p50", "lower")):
        mine = sorted(k for k in keys if k[0] == phase and k[1] == "venturi_sa")
        peers = sorted((k for k in keys if k[0] == phase and not k[1].startswith("venturi_sa")),
                       key=lambda k: -(_median([v[field] for v in keys[k].values()]) or 0))
        if not mine or not peers:
            continue
        unit = "ms, p50" if phase == "latency" else "jobs/s"
        lines.append(f"### {phase}: venturi ÷ peer ({unit}; {better} is better for venturi's value)\n")
        head = ["peer", "peer median"]
        head += [f"venturi/{k[2] or '-'} = {_median([v[field] for v in keys[k].values()]):,.1f}" for k in mine]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for pk in peers:
            pmed = _median([v[field] for v in keys[pk].values()])
            cells = [f"{pk[1]}/{pk[2] or '-'}", f"{pmed:,.1f}" if pmed is not None else "—"]
            for mk in mine:
                r = _ratio(keys[mk], keys[pk], field)
                cells.append(f"{r:.2f}×" if r is not None else "—")
                data.setdefault(phase, {}).setdefault(mk[2] or "-", {})[f"{pk[1]}/{pk[2] or '-'}"] = r
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines), data


class TargetSheet:
    """A table of targets evaluated on one run: each row a measurement, its goal and whether it is met."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.keys = _by_key(rows)
        self.out: list[dict[str, Any]] = []

    def k(self, phase: str, system: str, profile: str | None = None) -> dict[int, dict[str, Any]]:
        return self.keys.get((phase, system, profile), {})

    def add(self, name: str, value: float | None, goal: str, ok: bool | None, detail: str = "") -> None:
        self.out.append({"target": name, "value": value, "goal": goal, "met": ok, "detail": detail})

    def ratio_row(self, name: str, a: dict[int, dict[str, Any]], b: dict[int, dict[str, Any]], goal: float,
                  higher: bool = True) -> None:
        r = _ratio(a, b)
        detail = f"{_cell(a)} ÷ {_cell(b)}" if a and b else "not measured"
        self.add(name, r, f"{'≥' if higher else '≤'} {goal:g}",
                 None if r is None else (r >= goal if higher else r <= goal), detail)

    def render(self, title: str, detail: bool) -> str:
        lines = [f"{title}\n", "| target | value | goal | met |" + (" measured |" if detail else ""),
                 "|---|---|---|---|" + ("---|" if detail else "")]
        for t in self.out:
            v = "—" if t["value"] is None else f"{t['value']:.2f}"
            met = "—" if t["met"] is None else ("yes" if t["met"] else "**no**")
            lines.append(f"| {t['target']} | {v} | {t['goal']} | {met} |" + (f" {t['detail']} |" if detail else ""))
        return "\n".join(lines) + "\n"


def targets(rows: list[dict[str, Any]], claim_rows: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The targets of issue 17 (performance, round 2), evaluated on this run."""
    sheet = TargetSheet(rows)
    keys, k, add, ratio_row = sheet.keys, sheet.k, sheet.add, sheet.ratio_row

    ratio_row("drain tuned, 1 process ÷ PgQueuer tuned", k("drain", "venturi_sa", "tuned"),
              k("drain", "pgqueuer", "tuned"), 1.5)
    ratio_row("drain tuned, 2 processes ÷ raw batch-100, 2 processes", k("drain", "venturi_sa", "tuned_p2"),
              k("drain", "raw_psycopg2", "batch100_p2"), 0.8)
    ratio_row("drain default ÷ PgQueuer default", k("drain", "venturi_sa", "default"),
              k("drain", "pgqueuer", "default"), 1.5)
    ratio_row("enqueue one per transaction: time per job ÷ plain ORM session.add + commit",
              k("enqueue_one", "sqlalchemy_orm"), k("enqueue_one", "venturi_sa"), 1.10, higher=False)
    ratio_row("enqueue bulk ÷ PgQueuer", k("enqueue_bulk", "venturi_sa"), k("enqueue_bulk", "pgqueuer"), 1.0)
    ratio_row("enqueue bulk ÷ raw executemany", k("enqueue_bulk", "venturi_sa"),
              k("enqueue_bulk", "raw_psycopg2"), 1.0)
    lat = k("latency", "venturi_sa", "default")
    p50 = _median([v["p50"] for v in lat.values()])
    p99 = _median([v["p99"] for v in lat.values()])
    add("wake-up latency p50, ms", p50, "≤ 1.0", None if p50 is None else p50 <= 1.0)
    add("wake-up latency p99, ms", p99, "≤ 3", None if p99 is None else p99 <= 3.0)
    peer_p50 = {f"{s}/{p}": _median([v["p50"] for v in vals.values()])
                for (ph, s, p), vals in keys.items() if ph == "latency" and not s.startswith("venturi_sa")}
    if p50 is not None and peer_p50:
        best_peer = min(peer_p50.items(), key=lambda kv: kv[1] or 1e9)
        add("wake-up p50 below every peer's", p50, f"< {best_peer[0]} {best_peer[1]:.1f}",
            p50 < (best_peer[1] or 0))
    for limit in (1, 100):
        sel = sorted((r for r in claim_rows if r["limit"] == limit), key=lambda r: r["terminal_rows"])
        if len(sel) >= 2:
            small = _median([r["value"] for r in sel if r["terminal_rows"] == sel[0]["terminal_rows"]])
            big = _median([r["value"] for r in sel if r["terminal_rows"] == sel[-1]["terminal_rows"]])
            r = big / small if small else None
            add(f"claim {limit}: time at {sel[-1]['terminal_rows']:,} ÷ at {sel[0]['terminal_rows']:,} "
                "terminal rows", r, "≤ 1.20", None if r is None else r <= 1.2)
    return sheet.render("## issue-17 targets (this run)", detail=False), sheet.out


def _floor(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """bench/floor.py's rows of this run, by repeat."""
    return {r["run"]: r for r in rows if (r["phase"], r["system"], r["profile"]) == FLOOR and r.get("value")}


def _peer_latencies(keys: dict[tuple[str, str, str | None], dict[int, dict[str, Any]]]
                    ) -> dict[str, dict[int, dict[str, Any]]]:
    return {f"{s}/{p}": vals for (ph, s, p), vals in keys.items() if ph == "latency" and not s.startswith("venturi_sa")}


def round3_targets(rows: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The targets of issue 27 (performance, round 3), each with this run's measurement; ratios are
    same-repeat pairs, median over repeats."""
    sheet = TargetSheet(rows)
    keys, k, add, ratio_row = sheet.keys, sheet.k, sheet.add, sheet.ratio_row

    ratio_row("drain tuned, 1 process ÷ PgQueuer tuned", k("drain", "venturi_sa", "tuned"),
              k("drain", "pgqueuer", "tuned"), 1.0)
    ratio_row("drain tuned, 1 process ÷ raw batch-100, 1 process", k("drain", "venturi_sa", "tuned"),
              k("drain", "raw_psycopg2", "batch100_p1"), 0.9)
    ratio_row("drain default ÷ PgQueuer default", k("drain", "venturi_sa", "default"),
              k("drain", "pgqueuer", "default"), 1.0)
    ratio_row("drain tuned, 2 processes ÷ raw batch-100, 2 processes", k("drain", "venturi_sa", "tuned_p2"),
              k("drain", "raw_psycopg2", "batch100_p2"), 0.8)
    lat = k("latency", "venturi_sa", "default")
    peers = _peer_latencies(keys)
    p99 = _median([v["p99"] for v in lat.values()])
    peer_p99 = {name: _median([v["p99"] for v in vals.values()]) for name, vals in peers.items()}
    if p99 is not None and peer_p99:
        best, best_p99 = min(peer_p99.items(), key=lambda kv: kv[1] if kv[1] is not None else 1e9)
        worst_ratio = max(_ratio(lat, vals, "p99") or 0.0 for vals in peers.values())
        add("wake-up p99, ms ≤ every peer's p99", p99, f"≤ {best} {best_p99:.2f}",
            None if best_p99 is None else p99 <= best_p99,
            "; ".join(f"{n} {v:.2f}" for n, v in sorted(peer_p99.items()) if v is not None)
            + f"; venturi ÷ peer, same repeat, median, largest: {worst_ratio:.2f}")
    else:
        add("wake-up p99, ms ≤ every peer's p99", p99, "≤ every peer's", None, "not measured")
    floor = _floor(rows)
    r = _ratio(lat, floor, "p50")
    detail = (f"venturi p50 {_cell(lat, 'p50')} ms, floor p50 {_cell(floor, 'p50')} ms" if lat and floor
              else "not measured")
    add("wake-up p50 ÷ the floor's p50 (bench/floor.py)", r, "≤ 1.5", None if r is None else r <= 1.5, detail)
    ratio_row("enqueue bulk ÷ PgQueuer", k("enqueue_bulk", "venturi_sa"), k("enqueue_bulk", "pgqueuer"), 1.0)
    return sheet.render("## round 3 targets (issue 27; this run, same-repeat ratios, median over repeats)",
                        detail=True), sheet.out


def floor_table(rows: list[dict[str, Any]]) -> str:
    """Every system's wake-up latency beside the machine's floor (bench/floor.py), same-repeat ratios."""
    floor = _floor(rows)
    if not floor:
        return ""
    keys = _by_key(rows)
    lines = ["## wake-up latency beside the floor (ms; floor = NOTIFY to a waiting connection + one claim "
             "round trip, bench/floor.py)\n",
             "| system | p50 | p99 | max | p50 ÷ floor p50 | p99 ÷ floor p99 |", "|---|---|---|---|---|---|",
             f"| floor | {_cell(floor, 'p50')} | {_cell(floor, 'p99')} | {_cell(floor, 'max')} | 1.00 | 1.00 |"]
    lat = sorted(((s, p), vals) for (ph, s, p), vals in keys.items() if ph == "latency")
    for (system, profile), vals in sorted(lat, key=lambda kv: _median([v["p50"] for v in kv[1].values()]) or 0):
        r50, r99 = _ratio(vals, floor, "p50"), _ratio(vals, floor, "p99")
        lines.append(f"| {system}/{profile} | {_cell(vals, 'p50')} | {_cell(vals, 'p99')} | {_cell(vals, 'max')} | "
                     f"{'—' if r50 is None else f'{r50:.2f}'} | {'—' if r99 is None else f'{r99:.2f}'} |")
    parts = [f"delivery {_median([v['delivery'] for v in floor.values()]):.2f}",
             f"claim {_median([v['claim'] for v in floor.values()]):.2f}"]
    return "\n".join(lines) + f"\n\nfloor p50 split (medians): {', '.join(parts)} ms\n"


def _cell(values: dict[int, dict[str, Any]], field: str = "value") -> str:
    m = _median([v[field] for v in values.values()])
    return "—" if m is None else f"{m:,.1f}" if m < 100 else f"{m:,.0f}"


def processes_table(rows: list[dict[str, Any]]) -> str:
    """Drain at 1, 2 and 4 venturi processes (supervised), each ÷ 1 process, beside raw batch-100 at 1 and 2."""
    keys = _by_key(rows)
    lines = ["## drain by process count (same-run ratios to one process, median over runs)\n",
             "| system | profile | processes | jobs/s | ÷ 1 process |", "|---|---|---|---|---|"]
    for system, one, profiles in (("venturi_sa", "tuned", (("tuned", 1), ("tuned_p2", 2), ("tuned_p4", 4))),
                                  ("raw_psycopg2", "batch100_p1", (("batch100_p1", 1), ("batch100_p2", 2)))):
        base = keys.get(("drain", system, one), {})
        for profile, n in profiles:
            got = keys.get(("drain", system, profile), {})
            if got:
                r = _ratio(got, base)
                lines.append(f"| {system} | {profile} | {n} | {_cell(got)} | {'—' if r is None else f'{r:.2f}'} |")
    return "\n".join(lines) + "\n" if len(lines) > 3 else ""


def drivers_table(rows: list[dict[str, Any]]) -> str:
    """Every venturi system (one per driver) per workload, and its same-run ratio to psycopg2's."""
    keys = _by_key(rows)
    systems = ["venturi_sa", *[s for s in DRIVER_SYSTEMS if any(k[1] == s for k in keys)]]
    if len(systems) == 1:
        return ""
    workloads = (("enqueue one, jobs/s", "enqueue_one", None, "value"), ("enqueue bulk, jobs/s", "enqueue_bulk",
                 None, "value"), ("drain default, jobs/s", "drain", "default", "value"),
                 ("drain tuned, jobs/s", "drain", "tuned", "value"), ("wake-up p50, ms", "latency", "default", "p50"),
                 ("wake-up p99, ms", "latency", "default", "p99"))
    head = ["workload", *systems, *[f"{s} ÷ psycopg2" for s in systems[1:]]]
    lines = ["## venturi per driver (venturi_sa = psycopg2; same-run ratios, median over runs)\n",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, phase, profile, field in workloads:
        base = keys.get((phase, "venturi_sa", profile), {})
        got = [keys.get((phase, s, profile), {}) for s in systems]
        ratios = [_ratio(g, base, field) for g in got[1:]]
        lines.append("| " + " | ".join([name, *[_cell(g, field) for g in got],
                                        *["—" if r is None else f"{r:.2f}" for r in ratios]]) + " |")
    return "\n".join(lines) + "\n"


def run_adverse(runner: Any, a: argparse.Namespace, systems: list[str]) -> tuple[list[dict[str, Any]], str]:
    """``bench/adverse.py``'s conditions on this run's cluster, ``--repeats`` times; its rows and table."""
    import adverse
    from peerbench import orchestrator

    n, terminal = (min(a.adverse_n, 300), min(a.adverse_terminal_rows, 2_000)) if a.quick else (
        a.adverse_n, a.adverse_terminal_rows)
    rows: list[dict[str, Any]] = []
    for r in range(1, a.repeats + 1):
        for condition in adverse.CONDITIONS:
            for system in systems:
                orchestrator.log(f"[r{r}] adverse {condition} {system}")
                try:
                    rows.append(adverse.drain(runner, r, system, condition, n, terminal))
                except Exception as exc:  # noqa: BLE001 - keep the rest of the run
                    orchestrator.log(f"  !! adverse {condition} {system} failed: {exc}")
                    runner.record(run=r, phase="adverse", system=system, condition=condition, value=None,
                                  unit=None, error=str(exc)[-2000:])
    text = (f"## adverse conditions: drain of {n:,} no-op jobs, default profile, terminal rows {terminal:,} "
            "(each ÷ the same repeat's clean drain)\n\n" + adverse.table(rows, systems, list(adverse.CONDITIONS)))
    if adverse.size_table(rows):
        text += "\nSizes of the queue and history tables (archived conditions):\n\n" + adverse.size_table(rows)
    return rows, text


def floor_runner(base: type) -> type:
    """``peerbench``'s Runner that, before a repeat's first latency measurement, measures the floor."""

    class FloorRunner(base):  # type: ignore[misc,valid-type]
        def __init__(self, cfg: Any) -> None:
            super().__init__(cfg)
            self.floored: set[int] = set()  # the repeats whose floor was measured

        def phase_latency(self, r: int, system: str) -> None:
            if r not in self.floored:
                self.floored.add(r)
                self._guard(self.phase_latency_floor, r, FLOOR[1])
            super().phase_latency(r, system)

        def phase_latency_floor(self, r: int, system: str) -> None:
            import floor
            from peerbench import orchestrator

            orchestrator.log(f"[r{r}] latency floor")
            db = f"pb_floor_{r}"
            dsn = floor.prepare(self.cfg.dsn("postgres"), db)
            try:
                res = floor.measure(dsn, self.cfg.n_latency, self.cfg.latency_spacing)
                self.record(run=r, phase=FLOOR[0], system=system, profile=FLOOR[2], value=res["p50"], unit="ms",
                            **res)
            finally:
                self.drop_db(db)

    return FloorRunner


# ------------------------------------------------------------------------------ main
def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/run.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--harness", help="peerbench dir (default $PEERBENCH_HOME or <repo>/../shared/bench)")
    p.add_argument("--out", type=Path, default=BENCH_DIR / "results", help="results root (default bench/results)")
    p.add_argument("--systems", default=DEFAULT_SYSTEMS)
    p.add_argument("--phases", default=DEFAULT_PHASES)
    p.add_argument("--profiles", default=DEFAULT_PROFILES, help="drain profiles to run ('all' = every profile)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="tiny sizes, to smoke-test the adapters")
    p.add_argument("--n-one", type=int)
    p.add_argument("--n-bulk", type=int)
    p.add_argument("--n-drain", type=int)
    p.add_argument("--n-latency", type=int)
    p.add_argument("--drain-timeout-s", type=float, default=150.0)
    p.add_argument("--claim-sizes", default="10000,100000,1000000", help="completed rows per claim_cost step")
    p.add_argument("--claim-pending", type=int, default=5000)
    p.add_argument("--claim-samples", type=int, default=50)
    p.add_argument("--adverse-n", type=int, default=10_000, help="jobs per adverse-conditions drain")
    p.add_argument("--adverse-terminal-rows", type=int, default=1_000_000,
                   help="finished rows in the table for the adverse 'terminal' condition")
    p.add_argument("--host", default="127.0.0.1", help="with --port: use this server instead of a throwaway one")
    p.add_argument("--port", type=int, help="use an existing server (superuser, trust auth) on this port")
    p.add_argument("--user", default="postgres")
    p.add_argument("--driver", choices=("psycopg2", "psycopg", "asyncpg", "psycopg_async"), default="psycopg2",
                   help="venturi_sa's driver (default psycopg2); asyncpg, psycopg_async (psycopg 3's async "
                        "mode): AsyncSession enqueue and a Worker on an AsyncEngine")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    if argv[:1] == ["_child"]:
        child_main(argv[1:])
        return 0
    a = parse(argv)
    harness = find_harness(a.harness)
    load_harness(harness)
    # Children (this file with `_child`) find the harness, our adapter and pgbench through the env.
    os.environ["PEERBENCH_HOME"] = str(harness)
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    os.environ["VENTURI_BENCH_DRIVER"] = a.driver  # read by venturi_adapter, here and in children
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(BENCH_DIR), str(harness), *filter(None, [os.environ.get("PYTHONPATH")])])

    cluster = None
    port = a.port
    if port is None:
        from venturi_sa.devtools.throwaway import ThrowawayCluster

        cluster = ThrowawayCluster(PG_SETTINGS).start()
        port = cluster.port
        os.environ.setdefault("PG_BIN", str(cluster.bin_dir))
        print(f"throwaway PostgreSQL on 127.0.0.1:{port} ({cluster.data_dir})", file=sys.stderr)
    try:
        return _run(a, port)
    finally:
        if cluster is not None:
            cluster.stop()


def _run(a: argparse.Namespace, port: int) -> int:
    from peerbench import orchestrator, report

    orchestrator.PEERS = Path(__file__).resolve()  # children: `python bench/run.py _child ...`
    phases = a.phases.split(",")
    harness_phases = tuple(p for p in phases if p not in OUR_PHASES)
    cfg = orchestrator.Config(host=a.host, port=port, user=a.user, systems=tuple(a.systems.split(",")),
                              phases=harness_phases, repeats=a.repeats, drain_timeout_s=a.drain_timeout_s,
                              profiles=None if a.profiles == "all" else tuple(a.profiles.split(",")),
                              out_dir=a.out)
    claim_sizes = [int(s) for s in a.claim_sizes.split(",")]
    if a.quick:
        cfg = dataclasses.replace(cfg, n_one=200, n_bulk=2000, n_drain=1000, n_latency=20,
                                  pgbench_seconds=3, pgbench_scale=1, drain_timeout_s=60)
        claim_sizes = [min(s, 20_000) for s in claim_sizes]
    overrides = {f: getattr(a, f) for f in ("n_one", "n_bulk", "n_drain", "n_latency") if getattr(a, f)}
    cfg = dataclasses.replace(cfg, **overrides)

    runner = floor_runner(orchestrator.Runner)(cfg)
    rows = runner.run() if harness_phases else runner.results
    claim_rows: list[dict[str, Any]] = []
    if "claim_cost" in phases:
        import claimcost

        def record(**row: Any) -> None:
            runner.record(run=1, **row)

        try:
            claim_rows = claimcost.run(cfg.dsn("postgres"), cfg.dsn("pb_venturi_sa_claimcost"),
                                       sorted(set(claim_sizes)), a.claim_pending, a.claim_samples,
                                       record, orchestrator.log)
        except Exception as exc:  # noqa: BLE001 - keep the harness's results
            orchestrator.log(f"  !! claim_cost failed: {exc}")
            runner.record(run=1, phase="claim_cost", system="venturi_sa", profile=None, value=None,
                          unit=None, error=str(exc)[-2000:])

    adverse_md = ""
    if "adverse" in phases:
        adverse_systems = [s for s in ("venturi_sa", "pgqueuer") if s in cfg.systems]
        _, adverse_md = run_adverse(runner, a, adverse_systems)

    harness_rows = [r for r in rows if r["phase"] not in OUR_PHASES]  # rows is runner.results: ours are in it
    text = report.summarize(harness_rows) if harness_rows else ""
    ratios_md, ratios = ratio_tables(rows)
    if claim_rows:
        import claimcost

        text += "\n" + claimcost.table(claim_rows)
    targets_md, target_list = targets(rows, claim_rows)
    round3_md, round3_list = round3_targets(rows)
    versions = report.versions(cfg.systems)
    text += "\n" + ratios_md + "\n" + processes_table(rows) + "\n" + drivers_table(rows)
    text += "\n" + floor_table(rows) + "\n" + adverse_md + "\n" + targets_md + "\n" + round3_md
    text += "\n### versions\n\n" + "\n".join(f"- {k} {v}" for k, v in versions.items()) + "\n"
    (runner.run_dir / "summary.md").write_text(text)
    summary = {
        "stamp": runner.stamp, "config": dataclasses.asdict(cfg), "driver": a.driver, "pg_settings": PG_SETTINGS,
        "python": sys.version.split()[0], "versions": versions, "ratios": ratios, "targets": target_list,
        "round3_targets": round3_list, "latency_floor": list(_floor(rows).values()),
        "claim_cost": [{k: v for k, v in r.items() if k != "plan"} for r in claim_rows],
        "errors": [r for r in runner.results if r.get("value") is None],
    }
    (runner.run_dir / "venturi.json").write_text(json.dumps(summary, indent=1, default=str))
    print(text)
    print(f"results: {runner.run_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    t0 = time.monotonic()
    code = main(sys.argv[1:])
    if sys.argv[1:2] != ["_child"]:
        print(f"done in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    sys.exit(code)
