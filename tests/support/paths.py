"""Where things are: the repository, its ``docs/``, and the test applications run as processes.

``tests/support/apps`` is on ``sys.path`` (setup.cfg's ``pythonpath``) and on
the ``PYTHONPATH`` of every process a test starts (``tests/conftest.py``), so an
app is imported by its module name (``import worker_app``, ``venturi worker
cli_app:queue``) and run by its path (``python APPS / "worker_app.py"``).
"""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
TESTS = SUPPORT.parent
REPO = TESTS.parent
DOCS = REPO / "docs"
APPS = SUPPORT / "apps"
