"""Helpers for the CLI and quick-start tests: the ``venturi`` command, user-style URLs, doc examples."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from click.testing import CliRunner, Result

from support.paths import APPS
from venturi_sa.cli import cli

HERE = APPS  # the working directory of the CLI workers: cli_worker_app is there


def invoke(*args: str, env: dict[str, str | None] | None = None) -> Result:
    """Run ``venturi ARGS`` in-process, with VENTURI_DSN/VENTURI_PREFIX unset unless ``env`` gives them."""
    environment: dict[str, str | None] = {"VENTURI_DSN": None, "VENTURI_PREFIX": None, **(env or {})}
    return CliRunner().invoke(cli, list(args), env=environment, prog_name="venturi")


def ok(result: Result) -> Result:
    assert result.exit_code == 0, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert "Traceback" not in result.output
    return result


def fails(result: Result, *words: str) -> str:
    """Assert a clean failure: non-zero exit, exactly one ``venturi: error:`` line, no traceback."""
    assert result.exit_code != 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("venturi: error: "), lines[0]
    assert "Traceback" not in result.output
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@dataclass
class Stopped:
    """How a ``venturi worker`` subprocess ended after SIGTERM."""

    returncode: int | None = None
    err: str = ""


@contextmanager
def cli_worker(prefix: str, dsn: str, *args: str) -> Iterator[Stopped]:
    """``venturi worker cli_worker_app:queue ARGS`` as a subprocess on ``prefix``; SIGTERM on exit.

    The yielded :class:`Stopped` is filled in when the block ends (the process
    is killed if it has not stopped 30 s after SIGTERM).
    """
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("VENTURI_")},
           "CLI_TEST_PREFIX": prefix, "VENTURI_DSN": dsn}
    proc = subprocess.Popen([sys.executable, "-m", "venturi_sa", "worker", "cli_worker_app:queue", *args],
                            cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stopped = Stopped()
    try:
        yield stopped
        proc.send_signal(signal.SIGTERM)
        _, stopped.err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        stopped.returncode = proc.returncode


def plain_url(pg_url: str) -> str:
    """The test URL as a user would type it (``postgresql://``, no driver)."""
    return pg_url.replace("postgresql+psycopg2://", "postgresql://", 1)

