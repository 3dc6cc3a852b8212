"""The CLI behind a lock on the jobs table: one clear "busy" line and a non-zero exit within its query timeout.

Each command runs in a thread joined with a deadline while another connection
holds ``LOCK TABLE <prefix>_jobs IN ACCESS EXCLUSIVE MODE``; the lock is always
let go, so a command that would wait forever fails the test instead of hanging it.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import Result
from support.cli import fails, invoke, ok
from support.probes import jobs_locked
from support.web import seed

from venturi_sa import Queue

DEADLINE = 8.0
"""How long a command behind the lock may take with a 1 s query timeout, on a loaded machine."""


def _run(args: list[str], env: dict[str, str | None]) -> Result:
    found: list[Result] = []
    thread = threading.Thread(target=lambda: found.append(invoke(*args, env=env)), daemon=True)
    thread.start()
    thread.join(DEADLINE)
    assert found, f"venturi {' '.join(args)} still waited behind the lock after {DEADLINE}s"
    return found[0]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", [["stats"], ["jobs", "list"], ["jobs", "show", "{id}"], ["jobs", "why", "{id}"],
                                     ["jobs", "kill", "{id}"]])
def test_a_command_behind_a_table_lock_says_busy_and_fails(pg_url: str, engine: sa.Engine, models: Any,
                                                           command: list[str]) -> None:
    job_id = seed(engine, models)["pending"][0]
    env: dict[str, str | None] = {"VENTURI_DSN": pg_url, "VENTURI_PREFIX": models.prefix,
                                  "VENTURI_QUERY_TIMEOUT": "1"}
    args = [a.format(id=job_id) for a in command]
    with jobs_locked(engine, models.prefix):
        result = _run(args, env)
    line = fails(result, "the database is busy")
    assert "more than 1 s" in line and "--query-timeout" in line
    assert Queue(models).get_job(engine, job_id).status == "pending"
    ok(invoke(*args, env=env))  # the lock is gone: the same command works


@pytest.mark.timeout(60)
def test_the_option_sets_the_bound(pg_url: str, engine: sa.Engine, models: Any) -> None:
    env: dict[str, str | None] = {"VENTURI_DSN": pg_url, "VENTURI_PREFIX": models.prefix}
    with jobs_locked(engine, models.prefix):
        result = _run(["--query-timeout", "0.5", "stats"], env)
    assert "more than 0.5 s" in fails(result, "the database is busy")
