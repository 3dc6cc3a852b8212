"""Query plans of every dashboard page on a queue of 1M terminal jobs: EXPLAIN (ANALYZE, BUFFERS) of what it sends.

Seeds ``tests/support/bigqueue``'s data (``--rows`` terminal jobs, default 1M,
one journal entry each, spread over ten days; 500 live rows; 3 schedules, a
fire row for every 100th job; 2 pauses) into a throwaway cluster (or
``--dsn``), then requests every page of the dashboard through Starlette's
TestClient while the engine's statements are captured, and explains each
captured statement with its own parameters.  Each statement is named by the
storage builder that made it (``*_statement``), else by the storage function
that ran it.  Prints a Markdown table: page, query, plan (scan nodes with
their index, sorts), rows returned, shared buffers (hit / read), execution
time (median of ``--rounds``), and per page the request time (first request,
then the median of ``--rounds``, rendering included).  The machine load
(``uptime``) is printed with the figures.

    bash scripts/test.sh tests/unit/web/test_web_charts.py   # once: makes .venv (test + web extras)
    .venv/bin/python bench/webplans.py [--rows 1000000] [--rounds 5] [--dsn URL]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import html
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.bigqueue import seed_big  # noqa: E402

from venturi_sa import Models, storage  # noqa: E402
from venturi_sa.devtools.throwaway import ThrowawayCluster  # noqa: E402
from venturi_sa.storage.dashboard import JobFilter  # noqa: E402
from venturi_sa.web import create_app, queries  # noqa: E402

STORAGE = Path(storage.__file__).resolve().parent
NAMED = "webplans_query"


def _tag_builders() -> None:
    """Make every ``*_statement`` builder of the storage modules name what it builds (an execution option)."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(storage.__path__):
        module = importlib.import_module(f"venturi_sa.storage.{info.name}")
        for name, value in list(vars(module).items()):
            if name.endswith("_statement") and callable(value) and not hasattr(value, "__wrapped__"):
                setattr(module, name, _tagging(value))


def _tagging(builder: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(builder)
    def build(*args: Any, **kwargs: Any) -> Any:
        statement = builder(*args, **kwargs)
        return statement.execution_options(**{NAMED: builder.__name__.removesuffix("_statement")})

    return build


def _runner_name() -> str:
    """The innermost storage function (not the Backend facade) on the stack: what ran an untagged query."""
    frame = sys._getframe(2)
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        if path.parent == STORAGE and path.name != "backend.py":
            return frame.f_code.co_name
        frame = frame.f_back  # type: ignore[assignment]
    return "?"


@contextlib.contextmanager
def captured(engine: sa.Engine, prefix: str) -> Iterator[list[tuple[str, str, Any]]]:
    """``(name, SQL, parameters)`` of each statement on the queue's tables the engine runs inside the block."""
    seen: list[tuple[str, str, Any]] = []

    def note(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        if prefix in statement:
            name = context.execution_options.get(NAMED) if context is not None else None
            seen.append((name or _runner_name(), statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", note)


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _summary(plan: dict[str, Any], prefix: str) -> str:
    """The scans (with their index or table) and sorts of ``plan``, in plan order, each once."""
    shown: list[str] = []
    for node in _nodes(plan):
        kind = node["Node Type"]
        target = node.get("Index Name") or (node.get("Relation Name") if "Scan" in kind else None)
        if "Scan" in kind and target is None and kind not in ("Seq Scan", "Bitmap Heap Scan"):
            continue  # CTE and subquery scans: their inner nodes are listed
        if "Scan" in kind or kind in ("Sort", "Incremental Sort"):
            item = f"{kind} {target.removeprefix(prefix + '_')}" if target else kind
            if item not in shown:
                shown.append(item)
    return ", ".join(shown)


def explain(engine: sa.Engine, statement: str, parameters: Any, rounds: int) -> dict[str, Any]:
    """The plan of one run and the median execution time of ``rounds`` runs (each rolled back)."""
    raw = engine.raw_connection()
    try:
        times, plan = [], {}
        for _ in range(rounds):
            cur = raw.cursor()
            cur.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, parameters)
            doc = cur.fetchone()[0]
            doc = json.loads(doc) if isinstance(doc, str) else doc
            raw.rollback()
            plan = doc[0]
            times.append(plan["Execution Time"])
        return {"plan": plan["Plan"], "ms": statistics.median(times)}
    finally:
        raw.close()


def _pages(client: Any) -> dict[str, str]:
    first = client.get("/jobs").text
    found = re.search(r'href="(/jobs\?[^"]+)" id="next-page"', first)
    second = html.unescape(found.group(1)) if found else "/jobs"
    return {
        "overview, hour": "/", "overview, day": "/?window=day", "jobs": "/jobs", "jobs, next page": second,
        "jobs status=dead": "/jobs?status=dead", "jobs kind=kind_3": "/jobs?kind=kind_3",
        "jobs pending kind_4": "/jobs?status=pending&kind=kind_4", "jobs text \"order\": 777": '/jobs?q="order"%3A+777',
        "jobs created 1h": "/jobs?window=1h", "job (fired by a schedule)": "/jobs/" + "100".zfill(26),
        "job, pending (with why)": "/jobs/L" + "1".zfill(25),
        "workers": "/workers", "schedules & pauses": "/schedules",
    }


def _calls(models: Models, engine: sa.Engine) -> dict[str, Callable[[], object]]:
    """What runs outside a page request: the live feed's poll, the first batch of an "all matching" walk."""
    walk = JobFilter(statuses=("pending",))
    return {"live feed poll (change token)": lambda: queries.token(models, engine),
            "bulk \"all matching\" walk (cancel, status=pending)":
                lambda: next(queries.matching_ids(models, engine, walk, ("pending", "claimed"), 100, 2000))}


def measure(engine: sa.Engine, models: Models, rounds: int) -> list[dict[str, Any]]:
    """One row per statement of every page (and of the feed and the bulk walk)."""
    from starlette.testclient import TestClient

    app = create_app(engine, models.prefix, listen=False)
    rows: list[dict[str, Any]] = []
    with TestClient(app) as client:
        work: dict[str, Callable[[], object]] = {name: functools.partial(client.get, url)
                                                 for name, url in _pages(client).items()}
        work.update(_calls(models, engine))
        for page, call in work.items():
            with captured(engine, models.prefix) as statements:
                t0 = time.perf_counter()
                result = call()
                first = (time.perf_counter() - t0) * 1000
            assert getattr(result, "status_code", 200) == 200, (page, result)
            again = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                call()
                again.append((time.perf_counter() - t0) * 1000)
            for name, statement, parameters in statements:
                found = explain(engine, statement, parameters, rounds)
                plan = found["plan"]
                rows.append({"page": page, "query": name, "plan": _summary(plan, models.prefix),
                             "rows": plan.get("Actual Rows"), "hit": plan.get("Shared Hit Blocks", 0),
                             "read": plan.get("Shared Read Blocks", 0), "ms": found["ms"],
                             "page_first_ms": first, "page_ms": statistics.median(again),
                             "seq": "Seq Scan" in {n["Node Type"] for n in _nodes(plan)}})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| page (request ms: first / median) | query | plan: scans (index) and sorts | rows | "
             "buffers hit / read | exec ms |", "|---|---|---|---:|---:|---:|"]
    last = None
    for r in rows:
        page = "" if r["page"] == last else f"**{r['page']}** ({r['page_first_ms']:.0f} / {r['page_ms']:.0f})"
        last = r["page"]
        lines.append(f"| {page} | {r['query']} | {r['plan']}{' **SEQ SCAN**' if r['seq'] else ''} | "
                     f"{r['rows']} | {r['hit']} / {r['read']} | {r['ms']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="terminal jobs to seed")
    parser.add_argument("--rounds", type=int, default=5, help="runs per statement and per page (medians)")
    parser.add_argument("--dsn", help="a database to use instead of a throwaway cluster (a new prefix is made)")
    args = parser.parse_args()
    _tag_builders()
    with contextlib.ExitStack() as stack:
        dsn = args.dsn
        if dsn is None:
            cluster = stack.enter_context(ThrowawayCluster(settings={"fsync": "off"}))
            dsn = cluster.url
        engine = sa.create_engine(dsn, connect_args={"options": "-c timezone=UTC"})
        stack.callback(engine.dispose)
        t0 = time.perf_counter()
        models, _ = seed_big(engine, "webplans", args.rows)
        seeded = time.perf_counter() - t0
        with engine.connect() as conn:
            version = conn.execute(sa.text("SHOW server_version")).scalar_one()
        rows = measure(engine, models, args.rounds)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"### Dashboard query plans: {args.rows:,} terminal jobs (seeded in {seeded:.0f} s), PostgreSQL "
          f"{version}, {args.rounds} rounds\n\nload: {load}\n")
    print(table(rows))


if __name__ == "__main__":
    main()
