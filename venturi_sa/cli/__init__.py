"""The ``venturi`` command line: workers, migrations, stats, jobs, cleanup, quick start.

``main`` is the console-script entry point; ``cli`` is the click group (for
``click.testing.CliRunner``).  See ``docs/cli.md``.
"""

from __future__ import annotations

from venturi_sa.cli import jobs, migrate, ops, quickstart, worker_cmd  # noqa: F401 - register commands
from venturi_sa.cli.main import cli, main

__all__ = ["cli", "main"]
