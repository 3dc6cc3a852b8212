"""The ``venturi`` command end to end against a real PostgreSQL (click's runner and subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import Result
from support.cli import cli_worker, fails, invoke, ok, plain_url
from support.docblocks import fenced as doc_blocks
from support.factories import db_now
from support.ops import factory_session
from support.paths import DOCS
from support.queues import count
from support.waiting import wait_until
from support.workers import enqueue

import alembic_venturi
from venturi_sa import Queue, make_models
from venturi_sa.cli.durations import BadDuration, parse_duration

UNREACHABLE = "postgresql://postgres@127.0.0.1:1/postgres"


@pytest.fixture
def run():  # type: ignore[no-untyped-def]
    """``run(*args, env=None)``: invoke ``venturi`` with VENTURI_DSN unset unless given."""
    return invoke


def as_json(result: Result) -> Any:
    return json.loads(ok(result).stdout)


@pytest.fixture
def db(pg_url: str, prefix: str, models: Any) -> list[str]:
    """``--dsn``/``--prefix`` arguments for this test's migrated queue."""
    return ["--dsn", plain_url(pg_url), "--prefix", prefix]


# -- durations ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("7d", timedelta(days=7)), ("12h", timedelta(hours=12)), ("30m", timedelta(minutes=30)),
    ("90s", timedelta(seconds=90)), ("1h30m", timedelta(hours=1, minutes=30)), ("2w", timedelta(weeks=2)),
    (" 1D 2H ", timedelta(days=1, hours=2)), ("0s", timedelta(0)),
])
def test_durations_parse(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "7", "d", "7x", "-1d", "1.5h", "7 days", "h1"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(BadDuration, match="duration"):
        parse_duration(text)


# -- migrate and sql ------------------------------------------------------------------------------

def test_sql_prints_the_ddl_without_a_database(run) -> None:  # type: ignore[no-untyped-def]
    out = ok(run("sql", "--prefix", "shop")).stdout
    assert "CREATE TABLE shop_jobs" in out
    assert "shop_journal" in out and "shop_alembic_version" in out
    assert out.strip().endswith("COMMIT;")


def test_migrate_creates_then_reports_nothing_to_do(run, pg_url: str, prefix: str, engine) -> None:  # type: ignore[no-untyped-def]
    first = ok(run("migrate", "--dsn", plain_url(pg_url), "--prefix", prefix)).stdout
    assert f"queue {prefix!r}: migrated nothing (new tables) -> {alembic_venturi.HEAD}" in first
    assert alembic_venturi.current(engine, prefix) == alembic_venturi.HEAD
    again = as_json(run("migrate", "--dsn", plain_url(pg_url), "--prefix", prefix, "--json"))
    assert again == {"prefix": prefix, "from": alembic_venturi.HEAD, "to": alembic_venturi.HEAD, "changed": False}


def test_migrate_step_by_step_and_env_vars(run, pg_url: str, prefix: str, engine) -> None:  # type: ignore[no-untyped-def]
    env = {"VENTURI_DSN": plain_url(pg_url), "VENTURI_PREFIX": prefix}
    assert "-> v1" in ok(run("migrate", "--revision", "v1", env=env)).stdout
    assert alembic_venturi.current(engine, prefix) == "v1"
    assert f"migrated v1 -> {alembic_venturi.HEAD}" in ok(run("migrate", env=env)).stdout


# -- stats ----------------------------------------------------------------------------------------

def _fixture_jobs(engine: sa.Engine, models: Any) -> dict[str, list[str]]:
    """2 eligible + 1 scheduled mail, 1 claimed + 3 completed report, 1 dead mail."""
    ids: dict[str, list[str]] = {}
    with factory_session(engine, models) as (Job, Entry):
        for state, kind, n in [("pending", "mail", 2), ("scheduled", "mail", 1), ("claimed", "report", 1),
                               ("completed", "report", 3), ("dead", "mail", 1)]:
            jobs = Job.create_batch(n, kind=kind, **{state: True})
            ids[state] = [j.id for j in jobs]
        dead = Job._meta.sqlalchemy_session.get(models.Job, ids["dead"][0])
        Entry(job=dead, outcome="dead", note="SMTP said no", attachment={"code": 550})
    return ids


def test_stats_as_table_and_json(run, db: list[str], engine, models) -> None:  # type: ignore[no-untyped-def]
    _fixture_jobs(engine, models)
    data = as_json(run("stats", *db, "--json"))
    assert (data["eligible"], data["scheduled"], data["in_flight"], data["dead"], data["completed"]) == (2, 1, 1, 1, 3)
    assert data["by_kind"]["mail"]["pending"] == 3 and data["by_kind"]["report"]["completed"] == 3
    assert data["oldest_eligible_age_seconds"] >= 0
    text = ok(run("stats", *db)).stdout
    assert "mail" in text and "report" in text and "eligible now: 2" in text and "in flight: 1" in text


def test_stats_on_an_empty_queue(run, db: list[str]) -> None:  # type: ignore[no-untyped-def]
    assert "no jobs" in ok(run("stats", *db)).stdout


# -- jobs list / show ----------------------------------------------------------------------------

def test_jobs_list_pages_through_everything_with_the_cursor(run, db: list[str], engine, models) -> None:  # type: ignore[no-untyped-def]
    ids = _fixture_jobs(engine, models)
    everything = {i for group in ids.values() for i in group}
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(10):
        args = ["jobs", "list", *db, "--limit", "3", "--json"] + (["--cursor", cursor] if cursor else [])
        page = as_json(run(*args))
        assert len(page["items"]) <= 3
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(everything) and len(seen) == len(set(seen))
    text = ok(run("jobs", "list", *db, "--limit", "3")).stdout
    assert "more: add --cursor " in text and "KIND" in text


def test_jobs_list_filters(run, db: list[str], engine, models) -> None:  # type: ignore[no-untyped-def]
    ids = _fixture_jobs(engine, models)
    page = as_json(run("jobs", "list", *db, "--status", "completed", "--json"))
    assert sorted(i["id"] for i in page["items"]) == sorted(ids["completed"])
    mail = as_json(run("jobs", "list", *db, "--kind", "mail", "--status", "pending", "--json"))
    assert sorted(i["id"] for i in mail["items"]) == sorted(ids["pending"] + ids["scheduled"])
    later = as_json(run("jobs", "list", *db, "--finished-after", "2999-01-01T00:00:00", "--json"))
    assert later["items"] == []
    assert "no jobs match" in ok(run("jobs", "list", *db, "--kind", "nothing")).stdout


def test_jobs_show_prints_the_job_and_its_journal(run, db: list[str], engine, models) -> None:  # type: ignore[no-untyped-def]
    dead = _fixture_jobs(engine, models)["dead"][0]
    text = ok(run("jobs", "show", *db, dead)).stdout
    assert dead in text and "status:" in text and "journal:" in text
    assert "SMTP said no" in text and '{"code":550}' in text
    data = as_json(run("jobs", "show", *db, dead, "--json"))
    assert data["job"]["id"] == dead and data["job"]["status"] == "dead"
    assert [(e["outcome"], e["note"]) for e in data["journal"]] == [("dead", "SMTP said no")]


# -- admin actions -------------------------------------------------------------------------------

def test_retry_kill_and_release_are_journaled(run, db: list[str], engine, models) -> None:  # type: ignore[no-untyped-def]
    ids = _fixture_jobs(engine, models)
    dead, pending, claimed = ids["dead"][0], ids["pending"][0], ids["claimed"][0]

    assert f"job {dead} (mail): dead -> pending" in ok(run("jobs", "retry", *db, dead, "--note", "fixed")).stdout
    assert "job" in ok(run("jobs", "kill", *db, pending, "-m", "customer cancelled")).stdout
    released = as_json(run("jobs", "release", *db, claimed, "--note", "host died", "--json"))

    assert released["status"] == "pending" and released["claimed_by"] is None
    queue = Queue(models)
    assert queue.get_job(engine, dead).status == "pending"
    assert queue.get_job(engine, pending).status == "dead"
    notes = [e.note or "" for job_id in (dead, pending, claimed) for e in queue.journal(engine, job_id)[-1:]]
    assert "fixed" in notes[0] and "customer cancelled" in notes[1] and "host died" in notes[2]


def test_an_action_the_status_forbids_is_one_line(run, db: list[str], engine, models) -> None:  # type: ignore[no-untyped-def]
    completed = _fixture_jobs(engine, models)["completed"][0]
    fails(run("jobs", "retry", *db, completed), "cannot requeue", "completed")
    assert Queue(models).get_job(engine, completed).status == "completed"


# -- cleanup -------------------------------------------------------------------------------------

def _old_and_new(engine: sa.Engine, models: Any) -> dict[str, list[str]]:
    ten_days_ago = db_now(-timedelta(days=10))
    with factory_session(engine, models) as (Job, Entry):
        old_done = Job.create_batch(3, kind="mail", completed=True, finished_at=ten_days_ago)
        old_dead = Job.create_batch(2, kind="report", dead=True, finished_at=ten_days_ago)
        recent = Job(kind="mail", completed=True)
        live = [Job(kind="mail"), Job(kind="mail", claimed=True)]
        for job in old_done:
            Entry(job=job)
        ids = {"old_done": [j.id for j in old_done], "old_dead": [j.id for j in old_dead],
               "keep": [recent.id, *(j.id for j in live)]}
    return ids


def test_cleanup_dry_run_counts_and_deletes_nothing(run, db: list[str], engine, models) -> None:  # type: ignore[no-untyped-def]
    _old_and_new(engine, models)
    out = ok(run("cleanup", *db, "--older-than", "7d", "--dry-run")).stdout
    assert "dry run: 5 jobs" in out
    data = as_json(run("cleanup", *db, "--older-than", "7d", "--status", "dead", "--dry-run", "--json"))
    assert data["matched"] == 2 and data["deleted"] == 0 and data["dry_run"] is True
    assert count(engine, models.jobs_table) == 8


def test_cleanup_deletes_old_terminal_jobs_in_batches_with_progress(run, db: list[str], engine, models) -> None:  # type: ignore[no-untyped-def]
    ids = _old_and_new(engine, models)
    only_dead = as_json(run("cleanup", *db, "--older-than", "1h30m", "--status", "dead", "--json"))
    assert only_dead["deleted"] == 2

    result = ok(run("cleanup", *db, "--older-than", "7d", "--batch-size", "1"))
    assert "deleted 3 jobs finished more than 7d ago" in result.stdout
    progress = result.stderr.strip().splitlines()
    assert progress == ["deleted 1 jobs so far...", "deleted 2 jobs so far...", "deleted 3 jobs so far..."]
    with engine.connect() as conn:
        left = set(conn.execute(sa.select(models.jobs_table.c.id)).scalars())
    assert left == set(ids["keep"])
    assert count(engine, models.journal_table) == 0


# -- errors: one line, non-zero, no traceback -----------------------------------------------------

def test_no_dsn(run) -> None:  # type: ignore[no-untyped-def]
    fails(run("stats"), "no database given", "VENTURI_DSN")


def test_unreachable_database(run) -> None:  # type: ignore[no-untyped-def]
    fails(run("stats", "--dsn", UNREACHABLE), "cannot connect to postgresql+psycopg2://postgres@127.0.0.1:1/postgres")


def test_password_is_not_printed(run) -> None:  # type: ignore[no-untyped-def]
    line = fails(run("jobs", "list", "--dsn", "postgresql://u:s3cret@127.0.0.1:1/db"), "cannot connect")
    assert "s3cret" not in line


def test_not_a_postgres_dsn(run) -> None:  # type: ignore[no-untyped-def]
    fails(run("stats", "--dsn", "mysql://root@localhost/db"), "needs PostgreSQL")
    fails(run("stats", "--dsn", "not a url"), "invalid DSN")


def test_unmigrated_schema(run, pg_url: str, prefix: str) -> None:  # type: ignore[no-untyped-def]
    fails(run("stats", "--dsn", pg_url, "--prefix", prefix), "not migrated", "venturi migrate")


def test_old_schema_version(run, pg_url: str, prefix: str, engine) -> None:  # type: ignore[no-untyped-def]
    alembic_venturi.upgrade(engine, prefix, "v2")
    fails(run("jobs", "list", "--dsn", pg_url, "--prefix", prefix), "is at v2", alembic_venturi.HEAD)


def test_unknown_job_id(run, db: list[str]) -> None:  # type: ignore[no-untyped-def]
    fails(run("jobs", "show", *db, "01JD0Q8B6T5ZP3Y9M4W2XKQ7RN"), "no job with id")  # a ULID no job has
    fails(run("jobs", "kill", *db, "nope"), "job id must be a ULID", "no job has such an id")


def test_bad_duration(run, db: list[str]) -> None:  # type: ignore[no-untyped-def]
    result = run("cleanup", *db, "--older-than", "7x")
    fails(result, "invalid duration '7x'", "cleanup --help")
    assert result.exit_code == 2


def test_missing_required_option(run, db: list[str]) -> None:  # type: ignore[no-untyped-def]
    fails(run("cleanup", *db), "--older-than")


def test_bad_prefix(run, pg_url: str) -> None:  # type: ignore[no-untyped-def]
    fails(run("stats", "--dsn", pg_url, "--prefix", "Robert'); DROP TABLE x;--"), "invalid queue prefix")
    fails(run("sql", "--prefix", "x" * 80), "at most")
    fails(run("stats", "--dsn", pg_url), "no queue 'venturi' here")  # the default prefix: never "migrate it"
    fails(run("stats", env={"VENTURI_DSN": pg_url, "VENTURI_PREFIX": "Bad"}), "invalid queue prefix")


def test_bad_cursor(run, db: list[str]) -> None:  # type: ignore[no-untyped-def]
    fails(run("jobs", "list", *db, "--cursor", "garbage!"), "invalid history cursor")


def test_bad_revision(run, pg_url: str, prefix: str) -> None:  # type: ignore[no-untyped-def]
    fails(run("migrate", "--dsn", pg_url, "--prefix", prefix, "--revision", "v99"), "cannot migrate")


@pytest.mark.parametrize(("app", "words"), [
    ("cli_worker_app", ("APP must look like",)),
    ("no_such_module_here:queue", ("cannot import 'no_such_module_here'",)),
    ("cli_worker_app:missing", ("has no attribute 'missing'",)),
    ("cli_worker_app:not_a_queue", ("is a int, not a venturi_sa.Queue",)),
])
def test_bad_worker_app(run, pg_url: str, app: str, words: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    fails(run("worker", app, "--dsn", pg_url), *words)


def test_worker_for_an_unmigrated_queue(run, pg_url: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CLI_TEST_PREFIX", "cli_never_migrated")
    monkeypatch.delitem(sys.modules, "cli_worker_app", raising=False)
    fails(run("worker", "cli_worker_app:queue", "--dsn", pg_url), "not migrated")


# -- the real console entry point, in subprocesses ------------------------------------------------

def venturi(*args: str, env: dict[str, str] | None = None, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("VENTURI_")}
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "venturi_sa", *args], capture_output=True, text=True,
                          env=environment, timeout=60, check=False, **kwargs)


def test_help_lists_every_command() -> None:
    result = venturi("--help")
    assert result.returncode == 0
    for command in ("worker", "migrate", "sql", "stats", "jobs", "cleanup", "archive", "quickstart"):
        assert f"  {command} " in result.stdout
    jobs = venturi("jobs", "--help").stdout
    for command in ("list", "show", "retry", "kill", "release"):
        assert f"  {command} " in jobs


def test_console_error_is_one_line() -> None:
    result = venturi("stats")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "venturi: error: no database given: pass --dsn postgresql://user:password@host/dbname or set VENTURI_DSN"]


def test_worker_runs_jobs_and_stops_on_sigterm(pg_url: str, prefix: str, engine, models) -> None:  # type: ignore[no-untyped-def]
    from cli_worker_app import Greet

    queue = Queue(make_models(prefix), [Greet])
    with cli_worker(prefix, plain_url(pg_url), "--concurrency", "2", "--poll-interval", "0.2",
                    "--grace", "5") as stopped:
        ids = enqueue(engine, queue, Greet(name="ada"), Greet(name="grace"))
        wait_until(lambda: all(queue.get_job(engine, i).status == "completed" for i in ids),
                   what="the CLI worker to complete both jobs")
    err = stopped.err
    assert stopped.returncode == 0, err
    assert "started: kinds=greet concurrency=2" in err
    assert "greeting ada" in err and "[venturi-exec-" in err
    assert "processed 2 jobs" in err
    assert "Traceback" not in err
    assert [e.note for e in queue.journal(engine, ids[0])] == ["hello ada"]


# -- docs/cli.md: its sh examples run, in order ---------------------------------------------------

@pytest.mark.timeout(420)  # ~70 CLI processes in a row: minutes on a loaded 2-core machine
def test_cli_reference_examples_run(pg_url: str, prefix: str, engine, models) -> None:  # type: ignore[no-untyped-def]
    ids = _fixture_jobs(engine, models)
    blocks = doc_blocks(DOCS / "cli.md", "sh")
    assert len(blocks) >= 7
    script = "set -euo pipefail\n" + "\n".join(blocks)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("VENTURI_")},
           "VENTURI_DSN": plain_url(pg_url), "VENTURI_PREFIX": prefix, "JOB_ID": ids["dead"][0],
           "STUCK_JOB_ID": ids["claimed"][0],
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=400,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    queue = Queue(models)
    assert queue.get_job(engine, ids["dead"][0]).status == "dead"  # retried, then killed
    assert queue.get_job(engine, ids["claimed"][0]).status == "pending"
