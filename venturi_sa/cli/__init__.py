"""The ``venturi`` command line: workers, migrations, stats, jobs, schedules, cleanup, quick start,
dashboard.

``main`` is the console-script entry point; ``cli`` is the click group (for
``click.testing.CliRunner``).  See ``docs/cli.md``.
"""

from __future__ import annotations

import venturi_sa.cli.control  # noqa: F401 - each module registers its commands
import venturi_sa.cli.job_signals  # noqa: F401
import venturi_sa.cli.jobs  # noqa: F401
import venturi_sa.cli.limits  # noqa: F401
import venturi_sa.cli.migrate  # noqa: F401
import venturi_sa.cli.ops  # noqa: F401
import venturi_sa.cli.quickstart  # noqa: F401
import venturi_sa.cli.schedules  # noqa: F401
import venturi_sa.cli.web_cmd  # noqa: F401
import venturi_sa.cli.worker_cmd  # noqa: F401
from venturi_sa.cli.main import cli, main

__all__ = ["cli", "main"]
