"""Defect 16: ``venturi worker`` on an unmigrated queue prints exactly one error line (docs/cli.md)."""

from __future__ import annotations

import os
import subprocess
import sys

from support.paths import APPS

HERE = APPS


# Regression test of defect 16 (worker hardening issue): failed on e53c386.
def test_worker_on_an_unmigrated_queue_prints_one_line(pg_url: str) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("VENTURI_")},
           "HARD_PREFIX": f"hard_never_migrated_{os.getpid()}", "HARD_DSN": pg_url}
    dsn = pg_url.replace("postgresql+psycopg2://", "postgresql://", 1)
    result = subprocess.run([sys.executable, "-m", "venturi_sa", "worker", "cli_app:queue", "--dsn", dsn],
                            cwd=HERE, env=env, capture_output=True, text=True, timeout=60, check=False)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.stderr
    assert len(lines) == 1, f"stderr has {len(lines)} lines: {lines}"
    assert lines[0].startswith("venturi: error: ") and "not migrated" in lines[0], lines[0]
