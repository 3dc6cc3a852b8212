"""A job page stays small whatever the job holds: a 100,000-parent fan-in, a key merged 10,000 times."""

from __future__ import annotations

import re
from typing import Any

import pytest
import sqlalchemy as sa
from starlette.testclient import TestClient
from support.fan_in import fan_stem, parent_id, seed_fan_in, seed_merged

from venturi_sa.models.job_ids import new_job_id

pytestmark = pytest.mark.timeout(300)

MB = 1_000_000


def _next(html: str, name: str) -> str | None:
    """The "next" link of list ``name``'s pager, if it has one."""
    pager = re.search(rf'id="{name}-pager">(.*?)</p>', html, re.S)
    found = re.search(r'class="more" href="([^"]+)"', pager.group(1)) if pager else None
    return found.group(1).replace("&amp;", "&") if found else None


def test_a_100k_parent_fan_in_page_and_fragment_are_bounded_and_counted(
        client: TestClient, engine: sa.Engine, models: Any) -> None:
    fan_in = seed_fan_in(engine, models, "P", parents=100_000, completed=30_000)
    page = client.get(f"/jobs/{fan_in}")
    assert page.status_code == 200
    assert len(page.content) < MB
    assert "100000 parents (30000 completed, 70000 pending): showing 50" in page.text
    assert page.text.count(f'<tr><td><a class="mono" href="/jobs/{fan_stem("P")}') == 50
    fragment = client.get(f"/fragment/jobs/{fan_in}")
    assert fragment.status_code == 200 and len(fragment.content) < MB
    assert "30000 completed, 70000 pending" in fragment.text
    with engine.begin() as conn:  # ten more parents finish: the fragment changes, and stays bounded
        conn.execute(sa.text(f"UPDATE {models.names.jobs} SET status = 'completed', finished_at = now() "
                             "WHERE id IN (SELECT :stem || lpad(i::text, 10, '0') "
                             "FROM generate_series(30001, 30010) i)"), {"stem": fan_stem("P")})
    again = client.get(f"/fragment/jobs/{fan_in}", headers={"If-None-Match": fragment.headers["etag"]})
    assert again.status_code == 200 and len(again.content) < MB
    assert "30010 completed, 69990 pending" in again.text
    # paging reaches the last parent, through the keyset links, 50 at a time
    second = client.get(_next(page.text, "parents") or "")
    assert parent_id("P", 51) in second.text and parent_id("P", 50) not in second.text
    last = client.get(f"/jobs/{fan_in}?parents=99990")
    assert parent_id("P", 100_000) in last.text and _next(last.text, "parents") is None
    parent = client.get(f"/jobs/{parent_id('P', 1)}")
    assert "1 dependents" in parent.text and f"/jobs/{fan_in}" in parent.text


def test_a_key_merged_10000_times_shows_one_folded_line(client: TestClient, engine: sa.Engine, models: Any) -> None:
    job_id = seed_merged(engine, models, new_job_id(), merges=9_999)
    page = client.get(f"/jobs/{job_id}")
    assert page.status_code == 200 and len(page.content) < 100_000
    assert "9999 journal entries" in page.text and "×9999" in page.text
    assert page.text.count('<span class="outcome merged">') == 1
    with engine.connect() as conn:  # every merge keeps its journal row
        assert conn.execute(sa.text(f"SELECT count(*) FROM {models.names.journal} WHERE job_id = :j"),
                            {"j": job_id}).scalar_one() == 9_999


def test_the_journal_pages_past_fifty_lines(client: TestClient, engine: sa.Engine, models: Any) -> None:
    job_id = seed_merged(engine, models, new_job_id(), merges=0)
    with engine.begin() as conn:
        conn.execute(sa.text(f"INSERT INTO {models.names.journal} (job_id, kind, run_no, recorded_at, outcome, note) "
                             "SELECT :j, 'debounced', i, now() + make_interval(secs => i), "
                             "CASE WHEN i % 2 = 0 THEN 'merged' ELSE 'retried' END, 'line ' || i "
                             "FROM generate_series(1, 120) AS i"), {"j": job_id})
    seen, pages, url = [], 0, f"/jobs/{job_id}"
    while url:
        html = client.get(url).text
        pages += 1
        seen += re.findall(r"line (\d+)<", html)
        url = _next(html, "journal") or ""
    assert [int(n) for n in seen] == list(range(1, 121)) and pages == 3  # 50, 50 and 20 lines
    for bad in ("journal=x", "parents=-1", "dependents=not-a-cursor", "steps=%00"):
        assert client.get(f"/jobs/{job_id}?{bad}").status_code == 400, bad


def _walk(client: TestClient, url: str, name: str, pattern: str) -> tuple[list[str], int]:
    seen: list[str] = []
    pages = 0
    while url:
        html = client.get(url).text
        pages += 1
        seen += re.findall(pattern, html)
        url = _next(html, name) or ""
    return seen, pages


def test_dependents_and_steps_page_through_to_the_last(client: TestClient, engine: sa.Engine, models: Any) -> None:
    parent = seed_merged(engine, models, new_job_id(), merges=0)
    steps = models.steps_table.name
    with engine.begin() as conn:  # 120 dependents of one parent, 120 steps of it (as after= and ctx.step write)
        conn.execute(sa.text(
            f"INSERT INTO {models.names.jobs} (id, kind, payload, status, created_at, visible_at) "
            "SELECT '0D' || lpad(i::text, 24, '0'), 'child', '{}'::jsonb, 'pending', now() + make_interval(secs => i), "
            "'infinity' FROM generate_series(1, 120) AS i;"
            f"INSERT INTO {models.workflow.parents_table.name} (job_id, position, parent_id, policy, done) "
            "SELECT '0D' || lpad(i::text, 24, '0'), 0, :p, 'run', false FROM generate_series(1, 120) AS i;"
            f"INSERT INTO {steps} (job_id, name, entry, result, run_no, started_at, finished_at) "
            "SELECT :p, 'step-' || lpad(i::text, 3, '0'), 'step', to_jsonb(i), 1, now() + make_interval(secs => i), "
            "now() + make_interval(secs => i) FROM generate_series(1, 120) AS i"), {"p": parent})
    first = client.get(f"/jobs/{parent}").text
    assert "120 dependents (120 pending)" in first and "120 steps" in first
    dependents, pages = _walk(client, f"/jobs/{parent}", "dependents", r'href="/jobs/(0D\d+)"')
    assert dependents == [f"0D{i:024d}" for i in range(1, 121)] and pages == 3
    names, pages = _walk(client, f"/jobs/{parent}", "steps", r'class="mono">(step-\d+)<')
    assert names == [f"step-{i:03d}" for i in range(1, 121)] and pages == 3
