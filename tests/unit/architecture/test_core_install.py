"""The core install needs no greenlet: SQLAlchemy's asyncio extension is loaded only for async use."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
sys.modules["greenlet"] = None  # as on an install without it: `import greenlet` raises ImportError
import venturi_sa, venturi_sa.queue, venturi_sa.worker, venturi_sa.ops, venturi_sa.cli
from venturi_sa import Queue, Worker, make_models
assert "sqlalchemy.ext.asyncio" not in sys.modules, "the asyncio extension was imported"
print("ok")
"""


def test_venturi_imports_and_builds_a_worker_without_greenlet() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
