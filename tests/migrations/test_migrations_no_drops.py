"""Autogenerate never drops a venturi queue's tables, whatever ``env.py`` says (the plugin of
``alembic_venturi.autogenerate_guard``, loaded through the ``alembic.plugins`` entry point).

Real ``alembic revision --autogenerate`` and ``flask db migrate`` against scratch databases with the
archive's day partitions attached, and with ``env.py`` (or the app) lacking the ``make_models`` import;
the ``env.py`` files set ``target_metadata`` and nothing of venturi's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import sqlalchemy as sa
from test_migrations_autogenerate import MODELS, Project, operations

import alembic_venturi
from alembic_venturi.autogenerate_guard import PLUGIN_NAME
from venturi_sa import make_models
from venturi_sa.storage import archive

pytestmark = pytest.mark.timeout(120)

PREFIXES = ("shop", "billing_eu")


def attach_partitions(url: str, *prefixes: str) -> list[str]:
    """What a worker's archiver does at run time: today's and tomorrow's partitions, per queue."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    made: list[str] = []
    try:
        for prefix in prefixes:
            with sa.orm.Session(engine) as session, session.begin():
                made.extend(archive.ensure_partitions(make_models(prefix), session))
    finally:
        engine.dispose()
    assert len(made) == 2 * len(prefixes)
    return made


def with_queues(*prefixes: str) -> str:
    return MODELS + "".join(f'\nqueue_{p} = make_models("{p}", Base)\n' for p in prefixes)


def autogenerate(project: Project, message: str) -> tuple[str, str]:
    """The new revision's text and what the command printed."""
    versions = project.root / "migrations" / "versions"
    before = set(versions.glob("*.py"))
    printed = project.alembic("revision", "--autogenerate", "-m", message)
    (created,) = set(versions.glob("*.py")) - before
    return created.read_text(), printed


def test_the_plugin_is_an_installed_entry_point() -> None:
    """Alembic 1.18+ loads ``alembic.plugins`` entry points; the name puts it in the default set."""
    (entry,) = [e for e in metadata.entry_points(group="alembic.plugins") if e.name == PLUGIN_NAME]
    assert entry.value == "alembic_venturi.autogenerate_guard:PLUGIN"
    assert PLUGIN_NAME.startswith("alembic.autogenerate.")  # what autogenerate_plugins' default matches


def test_app_managed_queues_with_partitions_autogenerate_nothing(tmp_path: Path, fresh_db_url: str) -> None:
    project = Project(tmp_path, fresh_db_url, with_models=False, with_filter=False)
    (tmp_path / "models.py").write_text(with_queues(*PREFIXES))
    first, _ = autogenerate(project, "orders and two queues")
    assert "op.create_table('shop_archive'" in first and "op.create_table('billing_eu_archive'" in first
    project.alembic("upgrade", "head")
    attach_partitions(fresh_db_url, *PREFIXES)

    second, printed = autogenerate(project, "partitions attached")
    assert operations(second) == [], second
    assert "drop_table" not in second
    assert "WARNING" not in printed  # partitions are routine: no warning


def test_a_forgotten_import_drops_nothing_and_names_the_fix(tmp_path: Path, fresh_db_url: str) -> None:
    """Your own migrations created the queues; then env.py stopped importing make_models' module."""
    project = Project(tmp_path, fresh_db_url, with_models=False, with_filter=False)
    (tmp_path / "models.py").write_text(with_queues(*PREFIXES))
    autogenerate(project, "orders and two queues")
    project.alembic("upgrade", "head")
    attach_partitions(fresh_db_url, *PREFIXES)
    (tmp_path / "models.py").write_text(MODELS)  # the import of the module calling make_models is gone

    revision, printed = autogenerate(project, "import forgotten")
    assert operations(revision) == [], revision
    for prefix in PREFIXES:
        assert f"WARNING venturi: not dropping the tables of queue '{prefix}' ({prefix}_archive, " in printed
        assert f"env.py does not import the module that calls make_models('{prefix}'" in printed


def test_queues_on_venturis_migrations_are_never_dropped(tmp_path: Path, fresh_db_url: str) -> None:
    """venturi's own migrations manage the queues; env.py has no exclude_venturi and no make_models."""
    for prefix in PREFIXES:
        alembic_venturi.upgrade(fresh_db_url, prefix)
    attach_partitions(fresh_db_url, *PREFIXES)
    project = Project(tmp_path, fresh_db_url, with_models=False, with_filter=False)

    first, printed = autogenerate(project, "orders")
    assert "op.create_table('orders'" in first
    assert "shop" not in first and "billing_eu" not in first, first  # no drop_table, drop_index of them
    assert "WARNING" not in printed
    project.alembic("upgrade", "head")
    for prefix in PREFIXES:
        assert alembic_venturi.current(fresh_db_url, prefix) == alembic_venturi.HEAD


def test_a_project_table_that_looks_like_a_queue_is_still_dropped(tmp_path: Path, fresh_db_url: str) -> None:
    engine = sa.create_engine(fresh_db_url, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE reports_jobs (id int PRIMARY KEY);"
                                 "CREATE TABLE reports_journal (id int PRIMARY KEY)")
    finally:
        engine.dispose()
    project = Project(tmp_path, fresh_db_url, with_models=False, with_filter=False)
    first, _ = autogenerate(project, "orders")
    assert "op.drop_table('reports_jobs')" in first and "op.drop_table('reports_journal')" in first


def test_env_py_can_leave_the_plugin_out(tmp_path: Path, fresh_db_url: str) -> None:
    """``~alembic.autogenerate.venturi`` turns it off: the drops it removes come back."""
    project = Project(tmp_path, fresh_db_url, with_models=True, with_filter=False)
    autogenerate(project, "orders and the shop queue")
    project.alembic("upgrade", "head")
    made = attach_partitions(fresh_db_url, "shop")
    env = tmp_path / "migrations" / "env.py"
    env.write_text(env.read_text().replace("compare_server_default=True,", (
        "compare_server_default=True,\n"
        "        autogenerate_plugins=['alembic.autogenerate.*', '~alembic.autogenerate.venturi'],")))
    revision, _ = autogenerate(project, "plugin left out")
    for partition in made:
        assert f"op.drop_table('{partition}')" in revision


FLASK_APP = '''\
import os

from flask import Flask
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy.orm import Mapped, mapped_column

{venturi_import}
db = SQLAlchemy()


class Export(db.Model):
    __tablename__ = "exports"
    id: Mapped[int] = mapped_column(primary_key=True)


{make_models}
app = Flask("exports")
app.config["SQLALCHEMY_DATABASE_URI"] = os.environ["APP_DATABASE_URL"]
db.init_app(app)
Migrate(app, db, directory=os.environ["APP_MIGRATIONS"])
'''


class FlaskProject:
    """A Flask-SQLAlchemy app driven through the real ``flask db`` commands."""

    def __init__(self, root: Path, url: str) -> None:
        self.root, self.url = root, url

    def write_app(self, *prefixes: str) -> None:
        (self.root / "exports_app.py").write_text(FLASK_APP.format(
            venturi_import="from venturi_sa import make_models" if prefixes else "",
            make_models="".join(f'make_models("{p}", metadata=db.metadata)\n' for p in prefixes)))

    def flask(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "flask", "--app", "exports_app", "db", *args],
            cwd=self.root, capture_output=True, text=True, check=False,
            env={**os.environ, "APP_DATABASE_URL": self.url, "APP_MIGRATIONS": str(self.root / "migrations"),
                 "PYTHONPATH": os.pathsep.join([str(self.root), os.environ.get("PYTHONPATH", "")])},
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout + result.stderr

    def migrate(self, message: str) -> tuple[str | None, str]:
        """The new revision's text (None when Flask-Migrate wrote none: no changes) and the output."""
        versions = self.root / "migrations" / "versions"
        before = set(versions.glob("*.py"))
        printed = self.flask("migrate", "-m", message)
        created = set(versions.glob("*.py")) - before
        return (created.pop().read_text() if created else None), printed


def test_flask_db_migrate_keeps_partitions_and_forgotten_queues(tmp_path: Path, fresh_db_url: str) -> None:
    pytest.importorskip("flask_migrate")
    app = FlaskProject(tmp_path, fresh_db_url)
    app.write_app(*PREFIXES)
    app.flask("init")
    first, _ = app.migrate("exports and two queues")
    assert first is not None
    assert "op.create_table('shop_jobs'" in first and "op.create_table('billing_eu_archive'" in first
    app.flask("upgrade")
    made = attach_partitions(fresh_db_url, *PREFIXES)

    second, printed = app.migrate("partitions attached")
    assert second is None and "No changes in schema detected." in printed, second  # no drop_table
    assert "venturi: not dropping" in printed and made[0] in printed  # alembic.ini's logging shows it

    app.write_app()  # the app no longer imports the module that calls make_models
    third, printed = app.migrate("import forgotten")
    assert third is None and "No changes in schema detected." in printed, third
    assert "env.py does not import the module that calls make_models('shop'" in printed
