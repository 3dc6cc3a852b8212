"""Test helpers for the operations tests (history, stats, cleanup, admin, EXPLAIN)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import ClauseElement, Executable

from support.factories import factories_for
from venturi_sa import Models


@contextmanager
def factory_session(engine: sa.Engine, models: Models) -> Iterator[tuple[Any, Any]]:
    """``(JobFactory, JournalEntryFactory)`` on a fresh Session; committed on exit."""
    with Session(engine) as session:
        yield factories_for(models, session)
        session.commit()


@contextmanager
def counted(engine: sa.Engine) -> Iterator[list[str]]:
    """The SQL statements ``engine`` runs inside the block."""
    seen: list[str] = []

    def note(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)


class Explain(Executable, ClauseElement):
    """``EXPLAIN (FORMAT JSON) <statement>`` with the statement's own bind parameters."""

    inherit_cache = False

    def __init__(self, statement: Any) -> None:
        self.statement = statement


@compiles(Explain, "postgresql")
def _compile_explain(element: Explain, compiler: Any, **kw: Any) -> str:
    return "EXPLAIN (FORMAT JSON) " + compiler.process(element.statement, **kw)


def plan_of(engine: sa.Engine, statement: Any) -> dict[str, Any]:
    """The top plan node of ``statement`` (rolled back, so a DELETE is only planned)."""
    with engine.connect() as conn:
        doc = conn.execute(Explain(statement)).scalar_one()
        conn.rollback()
    return doc[0]["Plan"]  # type: ignore[no-any-return]


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def indexes_used(plan: dict[str, Any]) -> set[str]:
    return {n["Index Name"] for n in nodes(plan) if "Index Name" in n}


def node_types(plan: dict[str, Any]) -> set[str]:
    return {n["Node Type"] for n in nodes(plan)}


def assert_plan(engine: sa.Engine, statement: Any, models: Models, *, allowed: Sequence[str],
                all_of: Sequence[str] = (), any_of: Sequence[str] = (), sort_ok: bool = True,
                show: bool = False) -> dict[str, Any]:
    """Assert ``statement``'s plan scans no table and reads through the expected indexes; returns the plan.

    Index names are given without the prefix: every one of ``all_of`` and at
    least one of ``any_of`` (when given) must be used, and none outside
    ``allowed``; a ``Sort`` node fails unless ``sort_ok``.  ``show`` prints the plan.
    """
    plan = plan_of(engine, statement)
    used, types = indexes_used(plan), node_types(plan)
    shown = f"{sorted(types)} {sorted(used)}"
    if show:
        print(f"\n--- {all_of or any_of}\n{json.dumps(plan, indent=1)[:6000]}")
    assert "Seq Scan" not in types, shown
    assert {models.names.index(e) for e in all_of} <= used, shown
    assert not any_of or used & {models.names.index(e) for e in any_of}, shown
    assert used <= {models.names.index(e) for e in allowed}, shown
    assert sort_ok or "Sort" not in types, shown
    return plan


def count(engine: sa.Engine, sql: str, **params: Any) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(sql), params).scalar_one())
