"""docs/testing.md is a small project: write its files out and run pytest on them for real.

Each ``python`` block (not ``no-run``) starts with a ``# <file name>`` line;
blocks of one name are concatenated.  pytest runs in a subprocess, so the
``venturi`` plugin is loaded from its installed ``pytest11`` entry point,
against a scratch database named by ``$VENTURI_DATABASE_URL``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.docblocks import blocks
from support.paths import DOCS

PAGE = DOCS / "testing.md"


def files() -> dict[str, str]:
    out: dict[str, str] = {}
    for _, code in blocks(PAGE):
        first, _, body = code.partition("\n")
        assert first.startswith("# ") and first.endswith(".py"), f"block without a file name: {first!r}"
        out[first[2:]] = out.get(first[2:], "") + body
    return out


def test_the_page_is_a_passing_test_suite(tmp_path: Path, fresh_db_url: str) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("flask_sqlalchemy")
    pytest.importorskip("sqlmodel")
    pytest.importorskip("asyncpg")
    written = files()
    assert {"shop.py", "conftest.py", "test_fastapi_orders.py", "test_flask_orders.py", "test_drain.py",
            "test_clock.py", "test_perform.py", "test_inline.py", "heroes.py", "test_heroes.py", "async_api.py",
            "test_async_orders.py"} <= set(written)
    for name, code in written.items():
        (tmp_path / name).write_text(code)
    env = {**os.environ, "VENTURI_DATABASE_URL": fresh_db_url}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error",
                           "-W", "ignore::DeprecationWarning", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "\n11 passed" in done.stdout, done.stdout[-2000:]
    with sa.create_engine(fresh_db_url).connect() as conn:  # the rolled-back tests left nothing behind
        assert conn.execute(sa.text("SELECT count(*) FROM shop_jobs")).scalar_one() == 0
        assert conn.execute(sa.text("SELECT count(*) FROM receipts")).scalar_one() == 0
        assert conn.execute(sa.text("SELECT count(*) FROM hero")).scalar_one() == 0
