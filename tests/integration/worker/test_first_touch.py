"""First-touch errors and hints: both migration paths, the prefix from --app, tracebacks, one-line notes."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result
from sqlalchemy.orm import Session, scoped_session, sessionmaker
from support.hooks import drain
from support.workers import enqueue, journal

import alembic_venturi
from venturi_sa import Die, JobContext, Queue, SchemaNotMigrated, Task, make_models
from venturi_sa.cli import cli


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env={"VENTURI_DSN": None, "VENTURI_PREFIX": None},
                              prog_name="venturi")


def one_error_line(result: Result) -> str:
    assert result.exit_code != 0 and "Traceback" not in result.output, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("venturi: error: "), result.stderr
    return lines[0]


def test_not_migrated_names_both_migration_paths(engine: sa.Engine, pg_url: str) -> None:
    with pytest.raises(SchemaNotMigrated) as err:
        alembic_venturi.check_current(engine, "never_made")
    for words in ("venturi migrate --prefix never_made", "your own Alembic upgrade", "flask db upgrade"):
        assert words in str(err.value)
    line = one_error_line(invoke("stats", "--dsn", pg_url, "--prefix", "never_made"))
    assert "venturi migrate --prefix never_made" in line and "tables are in your models" in line


def test_the_default_prefix_finding_nothing_names_the_queues_there(pg_url: str, models: Any) -> None:
    line = one_error_line(invoke("stats", "--dsn", pg_url))
    assert "no queue 'venturi' here (the default prefix; none was given)" in line
    assert "queues in this database: " in line and "venturi migrate" not in line  # never "create 'venturi'"
    assert models.prefix in line or line.endswith(" more)")  # at most 10 named (other tests' queues too)


@pytest.fixture
def adoption_app(pg_url: str, models: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ADOPTION_PREFIX", models.prefix)
    monkeypatch.setenv("ADOPTION_URL", pg_url)
    monkeypatch.delitem(sys.modules, "adoption_app", raising=False)
    import adoption_app

    yield adoption_app
    sys.modules.pop("adoption_app", None)


def test_commands_take_the_prefix_and_database_from_the_app(engine: sa.Engine, adoption_app: Any) -> None:
    enqueue(engine, adoption_app.queue, adoption_app.queue.registry.get("stop_worker")())
    result = invoke("stats", "--app", "adoption_app:worker_app", "--json")
    assert result.exit_code == 0, result.output
    assert '"stop_worker"' in result.output
    listed = invoke("jobs", "list", "--app", "adoption_app:queue", "--dsn", str(engine.url.render_as_string(
        hide_password=False)))
    assert listed.exit_code == 0 and "stop_worker" in listed.output, listed.output


class Fails(Task):
    KIND = "fails"
    max_failures = 1

    def run(self, ctx: JobContext) -> Any:
        return helper()


def helper() -> Any:
    raise RuntimeError("deep down")


class Multiline(Task):
    KIND = "multiline"

    def run(self, ctx: JobContext) -> Any:
        return Die("first line\nsecond line")


def test_a_failure_is_logged_once_with_its_traceback_and_keeps_its_last_frames(
        engine: sa.Engine, models: Any, caplog: pytest.LogCaptureFixture) -> None:
    queue = Queue(models, [Fails])
    [job_id] = enqueue(engine, queue, Fails())
    with caplog.at_level(logging.WARNING, logger="venturi_sa"):
        drain(queue, engine)
    raised = [r for r in caplog.records if "job raised" in r.getMessage()]
    assert len(raised) == 1 and raised[0].levelno == logging.WARNING and raised[0].exc_info is not None
    [entry] = journal(engine, models, job_id)
    error = entry.attachment["error"]
    assert error["exception"] == "RuntimeError: deep down"
    assert error["frames"][-1].endswith('raise RuntimeError("deep down")') and "in helper" in error["frames"][-1]
    assert len(error["frames"]) <= 8


def test_multi_line_notes_stay_on_one_table_line(engine: sa.Engine, models: Any, pg_url: str) -> None:
    queue = Queue(models, [Multiline])
    [job_id] = enqueue(engine, queue, Multiline())
    drain(queue, engine)
    shown = invoke("jobs", "show", job_id, "--dsn", pg_url, "--prefix", models.prefix)
    assert shown.exit_code == 0, shown.output
    [row] = [line for line in shown.output.splitlines() if "dead" in line and "first line" in line]
    assert "first line | second line" in row


def test_framework_objects_given_to_the_wrong_call_are_named(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Multiline])

    class FakeDb:  # Flask-SQLAlchemy's ``db``: a scoped session and an engine property
        engine = property(lambda self: engine)

        def __init__(self) -> None:
            self.session = scoped_session(sessionmaker(bind=engine))

    db = FakeDb()
    with pytest.raises(TypeError, match=r"queue.enqueue\(\) takes a Session, got the FakeDb .*`db.session`"):
        queue.enqueue(db, Multiline())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"queue.journal\(\) takes an Engine, got scoped_session: .*`db.engine`"):
        queue.journal(db.session, "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"queue.get_job\(\) takes an Engine, a Session or a Connection, got "
                                        r"FakeDb: pass its session \(`db.session`\) or its engine"):
        queue.get_job(db, "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"queue.stats\(\) takes an Engine, got FakeDb: pass its engine"):
        queue.stats(db)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"takes a Session, not an Engine"):
        queue.enqueue(engine, Multiline())  # type: ignore[arg-type]
    with Session(engine) as session, pytest.raises(TypeError, match="session.get_bind"):
        queue.history(session)  # type: ignore[arg-type]
    assert make_models(models.prefix) is models
