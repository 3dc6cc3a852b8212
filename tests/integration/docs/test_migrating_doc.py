"""docs/migrating.md runs for real: every Celery and RQ mapping, on a scratch database."""

from __future__ import annotations

import pytest
from support.docblocks import run
from support.paths import DOCS

PAGE = DOCS / "migrating.md"


@pytest.mark.timeout(90)
def test_migrating_page_runs(fresh_db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", fresh_db_url)
    assert run(PAGE, {}) == 13
