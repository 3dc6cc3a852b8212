"""``venturi jobs show`` of a 100,000-parent fan-in prints a page of each list, its counts, and how to page on."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa
from support.cli import invoke as run
from support.cli import ok, plain_url
from support.fan_in import parent_id, seed_fan_in, seed_merged

from venturi_sa.models.job_ids import new_job_id

pytestmark = pytest.mark.timeout(300)


def test_show_of_a_huge_fan_in_is_bounded_and_pages(pg_url: str, prefix: str, models: Any,
                                                     engine: sa.Engine) -> None:
    db = ["--dsn", plain_url(pg_url), "--prefix", prefix]
    fan_in = seed_fan_in(engine, models, "Q", parents=100_000, completed=25_000)
    text = ok(run("jobs", "show", *db, fan_in)).stdout
    assert len(text.encode()) < 20_000
    assert "parents: 100000 (25000 completed, 75000 pending); showing 20, more: --parents-from 20" in text
    assert parent_id("Q", 20) in text and parent_id("Q", 21) not in text
    more = ok(run("jobs", "show", *db, fan_in, "--parents-from", "99990", "--limit", "50")).stdout
    assert parent_id("Q", 100_000) in more and parent_id("Q", 99_990) not in more and "more: --parents-from" not in more
    data = json.loads(ok(run("jobs", "show", *db, fan_in, "--json")).stdout)
    assert len(data["parents"]) == 20
    assert data["pages"]["parents"] == {"total": 100000, "counts": {"completed": 25000, "pending": 75000},
                                        "next": "20"}
    parent = ok(run("jobs", "show", *db, parent_id("Q", 1))).stdout
    assert "dependents: 1 (1 pending)" in parent and fan_in in parent


def test_show_folds_merged_entries(pg_url: str, prefix: str, models: Any, engine: sa.Engine) -> None:
    db = ["--dsn", plain_url(pg_url), "--prefix", prefix]
    job_id = seed_merged(engine, models, new_job_id(), merges=9_999)
    text = ok(run("jobs", "show", *db, job_id)).stdout
    assert len(text.encode()) < 5_000 and "merged x9999" in text and "journal: 9999" in text
    data = json.loads(ok(run("jobs", "show", *db, job_id, "--json")).stdout)
    assert [(line["outcome"], line["entries"]) for line in data["journal"]] == [("merged", 9999)]
    bad = run("jobs", "show", *db, job_id, "--journal-from", "x")
    assert bad.exit_code != 0 and "invalid journal cursor" in bad.output
