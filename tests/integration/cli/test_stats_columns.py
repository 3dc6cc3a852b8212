"""``venturi stats`` and ``queue.stats``: every job in exactly one column, the columns summing to the total,
a paused kind marked (issue 40, item 3: the sleeping job was in TOTAL and in no column)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from support.cli import invoke, plain_url
from support.why_jobs import jobs_in_every_state

from venturi_sa.cli.ops import COUNT_COLUMNS

pytest.importorskip("flask_sqlalchemy")
pytestmark = pytest.mark.timeout(90)
STATES = COUNT_COLUMNS[:-1]


@pytest.fixture
def queue(pg_url: str, models: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("ADOPTION_PREFIX", models.prefix)
    monkeypatch.setenv("ADOPTION_URL", pg_url)
    monkeypatch.delitem(sys.modules, "why_flask", raising=False)
    import why_flask

    yield why_flask.create_app().extensions["venturi"].queue
    sys.modules.pop("why_flask", None)


def test_each_job_is_in_one_column_and_they_sum_to_the_total(queue: Any, engine: sa.Engine, pg_url: str,
                                                             models: Any) -> None:
    jobs_in_every_state(engine, queue)
    stats = queue.stats(engine)
    for kind, counts in stats.by_kind.items():
        assert sum(counts[c] for c in STATES) == counts["total"], (kind, counts)
    assert sum(getattr(stats, c) for c in ("eligible", "scheduled", "backoff", "sleeping", "waiting_for_signal",
                                           "waiting", "in_flight", "completed", "dead")) == stats.total
    assert stats.by_kind["nap"]["sleeping"] == 1 and stats.by_kind["nap"]["scheduled"] == 0
    assert stats.by_kind["await_go"]["waiting_for_signal"] == 1
    assert stats.by_kind["flaky"]["backoff"] == 1 and stats.by_kind["flaky"]["eligible"] == 1
    assert stats.by_kind["zip_and_mail"]["waiting"] == 1 and stats.by_kind["zip_and_mail"]["scheduled"] == 1
    assert stats.paused_kinds == ["flaky"]
    db = ["--dsn", plain_url(pg_url), "--prefix", models.prefix]
    data = json.loads(invoke("stats", "--json", *db).stdout)
    assert data["by_kind"]["nap"]["sleeping"] == 1 and data["backoff"] == 1 and data["paused_kinds"] == ["flaky"]
    text = invoke("stats", *db).stdout
    header, *rows = [line.split() for line in text.split("\n\n")[0].splitlines()]
    assert header[1:] == [c.upper() for c in ("eligible", "scheduled", "backoff", "sleeping", "signal", "parents",
                                              "claimed", "completed", "dead", "total")]
    for row in rows:
        numbers = [int(n) for n in row[-len(COUNT_COLUMNS):]]
        assert sum(numbers[:-1]) == numbers[-1], row
    assert ["flaky", "(paused)"] == next(r for r in rows if r[0] == "flaky")[:2]
