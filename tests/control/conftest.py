"""Fixtures of the runtime-control tests (cancel, pause, edit, explain)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

# These tests reuse the integration tier's helpers (queue_kit: running workers, side tables).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

import control_app  # noqa: E402
from process_kit import Procs, app_procs  # noqa: E402


@pytest.fixture
def procs(pg_url: str, engine: sa.Engine, models: Any, prefix: str) -> Iterator[Procs]:
    """``control_app`` worker processes on this test's migrated queue (killed at the end)."""
    yield from app_procs(control_app, engine, pg_url, prefix)


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """An event gated handlers wait on; set at teardown, so a failing test leaves no handler waiting."""
    event = threading.Event()
    yield event
    event.set()
