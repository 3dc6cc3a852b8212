"""psycopg 3 reads ``'infinity'`` timestamps whatever the order of ``create_engine`` and ``import venturi_sa``.

A FastAPI project creates its engine in ``app/core/db.py`` before the module
holding its queue is imported.  The jobs that wait for their parents, or for
a signal with no deadline, have ``visible_at = 'infinity'``, which psycopg's
own loaders refuse ("timestamp too large").  Import order cannot be undone in
this process, so each case runs ``tests/support/apps/late_import_app.py`` in
a fresh interpreter: engine (and one pooled connection) first, venturi after,
then reads and drains of both waiting jobs.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import sqlalchemy as sa
from support.paths import APPS

pytestmark = pytest.mark.timeout(180)
SYNC_STEPS = ["get_job then", "explain then", "session.get then", "get_job approval", "explain approval",
              "session.get approval", "history", "dashboard", "drain", "worker"]
ASYNC_STEPS = ["get_job then", "explain then", "get_job approval", "explain approval", "history", "worker"]


@pytest.mark.parametrize(("stack", "steps"), [("sync", SYNC_STEPS), ("async", ASYNC_STEPS)])
def test_an_engine_created_before_import_reads_jobs_waiting_at_infinity(
        engine: sa.Engine, models: object, prefix: str, stack: str, steps: list[str]) -> None:
    env = {**os.environ, "VENTURI_DSN": engine.url.render_as_string(hide_password=False), "VENTURI_PREFIX": prefix}
    done = subprocess.run([sys.executable, str(APPS / "late_import_app.py"), stack], env=env, cwd=APPS,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line[3:] for line in done.stdout.splitlines() if line.startswith("OK ")] == steps, done.stdout
