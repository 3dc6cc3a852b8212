"""The mapped tables can be created on SQLite, for an application whose test suite runs there.

Only ``create_all`` and plain ORM rows: the queue itself (enqueue, workers,
operations) needs PostgreSQL.
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import DeclarativeBase, Session
from sqlalchemy.schema import CreateTable

from venturi_sa import make_models


class Base(DeclarativeBase):
    pass


class Customer(Base):
    __tablename__ = "customer"
    id = sa.Column(sa.Integer, primary_key=True)


def test_create_all_on_sqlite_with_the_application_tables() -> None:
    models = make_models("lite_app", Base)
    engine = sa.create_engine("sqlite://")
    Base.metadata.create_all(engine)
    tables = set(sa.inspect(engine).get_table_names())
    assert {"customer", "lite_app_jobs", "lite_app_journal"} <= tables
    with Session(engine) as session, session.begin():  # the flush listener sends no NOTIFY on SQLite
        session.add(models.Job(kind="k", payload={"a": [1]}, created_at=sa.func.current_timestamp(),
                               visible_at=sa.func.current_timestamp()))
    with engine.connect() as conn:
        row = conn.execute(sa.select(models.jobs_table)).one()
    assert (row.kind, row.payload, row.carry, row.status, row.priority) == ("k", {"a": [1]}, None, "pending", 1)
    engine.dispose()


def test_the_postgresql_ddl_is_unchanged() -> None:
    models = make_models("ddl_check")
    pg = str(CreateTable(models.jobs_table).compile(dialect=postgresql.dialect()))
    assert "payload JSONB NOT NULL" in pg and "carry JSONB DEFAULT 'null'::jsonb NOT NULL" in pg
    journal = str(CreateTable(models.journal_table).compile(dialect=postgresql.dialect()))
    assert "id BIGINT GENERATED ALWAYS AS IDENTITY" in journal and "attachment JSONB" in journal
    lite = str(CreateTable(models.jobs_table).compile(dialect=sqlite.dialect()))
    assert "payload JSON NOT NULL" in lite
    # SQLAlchemy before 2.0.2x parenthesizes an expression default on SQLite: the same default
    assert re.search(r"carry JSON DEFAULT \(?'null'\)? NOT NULL", lite), lite
