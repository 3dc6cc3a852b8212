"""docs/migrating.md runs for real: every Celery and RQ mapping, on a scratch database."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from test_docs_pages import run  # noqa: E402

PAGE = Path(__file__).resolve().parents[2] / "docs" / "migrating.md"


@pytest.mark.timeout(90)
def test_migrating_page_runs(fresh_db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", fresh_db_url)
    assert run(PAGE, {}) == 13
