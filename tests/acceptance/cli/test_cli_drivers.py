"""The ``venturi`` command on every PostgreSQL URL form and driver, and its refusals.

A missing driver is a real unimportable module (``sys.modules[name] = None``
blocks its import), not a stub of venturi's own code.
"""

from __future__ import annotations

import sys

import pytest
import sqlalchemy as sa
from click.testing import Result
from support.cli import cli_worker, invoke
from support.drivers import driver_url
from support.waiting import wait_until
from support.workers import enqueue

from venturi_sa import Queue, make_models
from venturi_sa.cli.connect import normalize_dsn


def one_error_line(result: Result) -> str:
    assert result.exit_code != 0, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("venturi: error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0].removeprefix("venturi: error: ")


def as_scheme(pg_url: str, scheme: str) -> str:
    """``pg_url`` written with ``scheme`` (``postgres``, ``postgresql+asyncpg``, ...)."""
    return scheme + "://" + pg_url.split("://", 1)[1]


@pytest.mark.parametrize(("scheme", "runs_on"), [
    ("postgresql", "psycopg2"), ("postgres", "psycopg2"), ("postgresql+psycopg2", "psycopg2"),
    ("postgresql+psycopg", "psycopg"), ("postgresql+asyncpg", "psycopg"), ("postgresql+psycopg_async", "psycopg"),
])
def test_every_postgresql_url_works(scheme: str, runs_on: str, pg_url: str, prefix: str, models: object) -> None:
    dsn = as_scheme(pg_url, scheme)
    assert normalize_dsn(dsn).drivername == f"postgresql+{runs_on}"
    result = invoke("stats", "--dsn", dsn, "--prefix", prefix)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output


def test_an_asyncpg_url_keeps_its_ssl_setting_in_libpq_terms() -> None:
    url = normalize_dsn("postgresql+asyncpg://u@h/db?ssl=require&prepared_statement_cache_size=0")
    assert (url.drivername, dict(url.query)) == ("postgresql+psycopg", {"sslmode": "require"})


@pytest.mark.parametrize(("dsn", "message"), [
    ("mysql://root@localhost/db", "unsupported database 'mysql' in the DSN: venturi needs PostgreSQL"),
    ("sqlite:///jobs.db", "unsupported database 'sqlite' in the DSN: venturi needs PostgreSQL"),
    ("mysql+pymysql://root@localhost/db", "unsupported database 'mysql' in the DSN: venturi needs PostgreSQL"),
    ("postgresql+pg8000://u@localhost/db", "driver pg8000 is not supported; use psycopg2, psycopg or asyncpg"),
    ("postgresql+psycopg2cffi://u@localhost/db",
     "driver psycopg2cffi is not supported; use psycopg2, psycopg or asyncpg"),
])
def test_other_databases_and_drivers_are_refused_in_one_line(dsn: str, message: str) -> None:
    assert one_error_line(invoke("stats", "--dsn", dsn)).startswith(message)


@pytest.mark.parametrize(("blocked", "scheme", "message"), [
    (("psycopg",), "postgresql+psycopg", "driver psycopg is not installed: pip install 'venturi[psycopg]'"),
    (("psycopg",), "postgresql+psycopg_async",
     "the CLI runs the psycopg_async URL on a sync driver (psycopg), and none is installed: "
     "pip install 'venturi[psycopg]'"),
    (("psycopg2",), "postgresql+psycopg2", "driver psycopg2 is not installed: pip install 'venturi[psycopg2]'"),
    (("psycopg", "psycopg2"), "postgresql",
     "the CLI runs a postgresql:// URL on a sync driver (psycopg2 or psycopg), and none is installed: "
     "pip install 'venturi[psycopg2]' or 'venturi[psycopg]'"),
    (("psycopg", "psycopg2"), "postgresql+asyncpg",
     "the CLI runs the asyncpg URL on a sync driver (psycopg or psycopg2), and none is installed: "
     "pip install 'venturi[psycopg]' or 'venturi[psycopg2]'"),
])
def test_a_missing_driver_names_its_extra(blocked: tuple[str, ...], scheme: str, message: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for module in blocked:
        monkeypatch.setitem(sys.modules, module, None)
    assert one_error_line(invoke("stats", "--dsn", f"{scheme}://u@localhost/db")) == message


@pytest.mark.parametrize(("blocked", "scheme", "runs_on"), [
    ("psycopg2", "postgresql", "psycopg"),
    ("psycopg", "postgresql+asyncpg", "psycopg2"),
])
def test_the_fallback_driver_is_used_when_the_first_choice_is_missing(
        blocked: str, scheme: str, runs_on: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, blocked, None)
    assert normalize_dsn(f"{scheme}://u@localhost/db").drivername == f"postgresql+{runs_on}"


@pytest.mark.parametrize("scheme", ["postgresql+psycopg", "postgresql+asyncpg"])
def test_a_cli_worker_on_psycopg_listens_without_reconnecting(scheme: str, pg_url: str, prefix: str,
                                                              engine: sa.Engine, models: object) -> None:
    from cli_worker_app import Greet

    queue = Queue(make_models(prefix), [Greet])
    psycopg_engine = sa.create_engine(driver_url(pg_url, "psycopg"))
    try:
        with cli_worker(prefix, as_scheme(pg_url, scheme), "--poll-interval", "30") as stopped:
            for name in ("ada", "grace", "alan"):  # woken by NOTIFY: the poll interval is 30 s
                [job_id] = enqueue(psycopg_engine, queue, Greet(name=name))
                wait_until(lambda j=job_id: queue.get_job(engine, j).status == "completed", timeout=15,
                           what=f"the CLI worker to complete {name}'s job")
    finally:
        psycopg_engine.dispose()
    err = stopped.err
    assert stopped.returncode == 0, err
    assert "processed 3 jobs" in err
    assert "LISTEN" not in err and "Traceback" not in err, err
