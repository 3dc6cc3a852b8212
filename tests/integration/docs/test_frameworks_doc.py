"""docs/frameworks.md runs for real: the Flask and FastAPI walk-throughs on a scratch database.

The page's blocks run in order in one module namespace (``run`` of
test_docs_pages.py) with ``$DATABASE_URL`` naming a database of their own
(its fixed table names and prefixes must not meet other tests' rows).
Flask-Migrate's generated ``env.py`` reconfigures logging from its
``alembic.ini``, and tries Flask-SQLAlchemy's deprecated ``get_engine()``
first; the test puts the process's logging back and ignores that warning.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from support.docblocks import run
from support.paths import DOCS

PAGE = DOCS / "frameworks.md"


@pytest.fixture
def logging_kept() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    disabled = {name: lg.disabled for name, lg in logging.Logger.manager.loggerDict.items()
                if isinstance(lg, logging.Logger)}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, lg in logging.Logger.manager.loggerDict.items():
        if isinstance(lg, logging.Logger):
            lg.disabled = disabled.get(name, False)


@pytest.mark.timeout(90)
@pytest.mark.filterwarnings("ignore:'get_engine' is deprecated:DeprecationWarning")  # Flask-Migrate's env.py
def test_frameworks_page_runs(fresh_db_url: str, monkeypatch: pytest.MonkeyPatch, logging_kept: None) -> None:
    pytest.importorskip("flask_migrate")
    monkeypatch.setenv("DATABASE_URL", fresh_db_url)
    assert run(PAGE, {}) >= 8
