"""The pytest plugin: registered by its entry point; clear errors when it lacks a database or a queue."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest


def test_the_entry_point_registers_the_plugin(pytestconfig: pytest.Config) -> None:
    (ep,) = [e for e in entry_points(group="pytest11") if e.name == "venturi"]
    assert ep.value == "venturi_sa.testing.plugin"
    assert pytestconfig.pluginmanager.has_plugin("venturi")


def _pytest(tmp_path: Path, test: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_it.py").write_text(test)
    clean = {k: v for k, v in os.environ.items() if k not in ("VENTURI_DATABASE_URL", "PYTEST_ADDOPTS")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env={**clean, **env}, capture_output=True, text=True, timeout=60)


def test_without_a_database_the_fixtures_say_how_to_name_one(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "def test_x(venturi_queue_session):\n    pass\n")
    assert done.returncode == 1
    assert "venturi: no test database; pass --venturi-database-url, set $VENTURI_DATABASE_URL" in done.stdout


def test_without_a_queue_fixture_drain_says_to_define_one(tmp_path: Path, pg_url: str) -> None:
    done = _pytest(tmp_path, "def test_x(venturi_drain):\n    venturi_drain()\n", VENTURI_DATABASE_URL=pg_url)
    assert done.returncode == 1
    assert "define a `venturi_queue` fixture returning your Queue" in done.stdout
