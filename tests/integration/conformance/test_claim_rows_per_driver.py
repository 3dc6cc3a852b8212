"""The claim's rows per sync driver, as driver SQL (``storage/driver_sql``) or through the compiled path.

A claim on a ``Connection`` runs its text compiled once with
``exec_driver_sql`` and reads the driver's rows; on a ``Session`` it takes
the compiled path.  Either way the same jobs come back (a carry of JSON
null as None, the wait as a float), the engine's event listeners see the
statement, errors are SQLAlchemy's, and a dead connection is invalidated.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema, fields
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from venturi_sa import Queue, Task
from venturi_sa.storage import claim as claims
from venturi_sa.storage.params import ClaimedJob, ClaimParams


class Text(Schema):
    text = fields.String(required=True)


class Note(Task):
    KIND = "note"
    Payload = Text


def _params(limit: int = 10) -> ClaimParams:
    return ClaimParams(worker_id="w-rows", kinds=[Note.KIND], limit=limit, leases={},
                       default_lease=timedelta(seconds=60), caps={})


def _seed(engine: sa.Engine, models: Any) -> None:
    queue = Queue(models, [Note])
    with Session(engine) as session:
        queue.enqueue_many(session, [Note(text="a"), Note(text="b")])
        session.commit()
    with engine.begin() as conn:  # one carry saved, one left JSON null
        conn.execute(sa.update(models.Job).where(models.Job.payload["text"].as_string() == "a").values(carry={"n": 1}))


def _comparable(jobs: list[ClaimedJob]) -> list[tuple[Any, ...]]:
    return [(j.id, j.kind, j.payload, j.carry, j.priority, j.created_at, j.run_count, j.failure_count,
             j.claimed_by, j.timeout, j.fence) for j in jobs]


def test_a_connection_s_driver_sql_returns_what_a_session_s_compiled_claim_returns(
        engine: sa.Engine, models: Any) -> None:
    _seed(engine, models)
    with engine.connect() as conn:
        with conn.begin() as tx:
            fetched = claims.claim(models, conn, _params())
            tx.rollback()
    with Session(engine) as session, session.begin():
        compiled = claims.claim(models, session, _params())
    assert len(fetched) == 2
    assert _comparable(fetched) == _comparable(compiled)
    assert sorted((j.payload["text"], j.carry) for j in fetched) == [("a", {"n": 1}), ("b", None)]
    assert all(isinstance(j.waited, float) for j in fetched)


def test_a_connection_that_has_not_begun_claims_in_its_autobegun_transaction(engine: sa.Engine, models: Any) -> None:
    _seed(engine, models)
    with engine.connect() as conn:
        assert len(claims.claim(models, conn, _params(1))) == 1
        conn.commit()
    with engine.connect() as conn:
        claimed = conn.execute(sa.select(sa.func.count()).where(models.Job.status == "claimed")).scalar_one()
    assert claimed == 1


def test_event_listeners_still_see_the_claim(engine: sa.Engine, models: Any) -> None:
    _seed(engine, models)
    seen: list[str] = []

    def note(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    sa.event.listen(engine, "before_cursor_execute", note)
    try:
        with engine.begin() as conn:
            assert len(claims.claim(models, conn, _params())) == 2
    finally:
        sa.event.remove(engine, "before_cursor_execute", note)
    assert any(s.lstrip().startswith(("UPDATE", "WITH")) and models.jobs_table.name in s for s in seen), seen


def test_a_claim_on_a_terminated_connection_raises_sqlalchemy_s_error_and_invalidates_it(
        engine: sa.Engine, models: Any) -> None:
    _seed(engine, models)
    with engine.connect() as conn:
        with conn.begin():
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        with engine.connect() as other:
            other.exec_driver_sql(f"SELECT pg_terminate_backend({int(pid)})")
        with pytest.raises(DBAPIError) as raised:
            with conn.begin():
                claims.claim(models, conn, _params())
        assert raised.value.connection_invalidated
        assert conn.invalidated
