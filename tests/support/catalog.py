"""Catalog snapshots of one queue's tables, and the seed DDL they are compared with.

A catalog snapshot describes one queue's tables as PostgreSQL stores them
(columns, defaults, identity, constraints, index definitions, the identity
sequence, every relation named after the prefix), with the prefix replaced by
``{{prefix}}`` so that two prefixes, or two databases, compare with ``==``.

Catalogs differ between PostgreSQL versions (from 18 on, every NOT NULL
column also has a ``pg_constraint`` row), so a migrated catalog is only ever
compared with the seed DDL applied on the same server.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

import alembic_venturi
from alembic_venturi.bodies import render_body
from venturi_sa import make_models

TOKEN = "{{prefix}}"
SEED_DDL = (Path(__file__).parent / "seed_ddl.sql").read_text(encoding="utf-8")

COLUMNS = sa.text("""
    SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
           pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated
    FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE c.relname = ANY(:tables) AND pg_table_is_visible(c.oid)
      AND a.attnum > 0 AND NOT a.attisdropped
    ORDER BY c.relname, a.attnum
""")
CONSTRAINTS = sa.text("""
    SELECT c.relname, con.conname, con.contype, pg_get_constraintdef(con.oid)
    FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
    WHERE c.relname = ANY(:tables) AND pg_table_is_visible(c.oid)
""")
INDEXES = sa.text("""
    SELECT t.relname, i.relname, pg_get_indexdef(i.oid), x.indisunique, x.indisprimary
    FROM pg_index x
    JOIN pg_class i ON i.oid = x.indexrelid
    JOIN pg_class t ON t.oid = x.indrelid
    WHERE t.relname = ANY(:tables) AND pg_table_is_visible(t.oid)
""")
IDENTITY_SEQUENCE = sa.text("""
    SELECT format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement, s.seqmin, s.seqmax,
           s.seqcache, s.seqcycle
    FROM pg_sequence s
    WHERE s.seqrelid = pg_get_serial_sequence(:journal, 'id')::regclass
""")
SERVER_MAJOR = sa.text("SELECT current_setting('server_version_num')::int / 10000")
# PostgreSQL 18 records NOT NULL as constraints (contype 'n') named <table>_<column>_not_null.
NOT_NULL_CONSTRAINTS_SINCE = 18
SEED_NOT_NULL_COLUMNS = {"jobs": 10, "journal": 6}  # primary keys included
RELATIONS = sa.text("""
    SELECT relname, relkind FROM pg_class
    WHERE relname LIKE :pattern ESCAPE '!' AND pg_table_is_visible(oid)
""")


def _normalizer(prefix: str) -> Callable[[Any], Any]:
    pattern = re.compile(rf"(?<![a-z0-9_]){re.escape(prefix)}_")

    def normalize(value: Any) -> Any:
        return pattern.sub(f"{TOKEN}_", value) if isinstance(value, str) else value

    return normalize


SEED_TABLES = ("jobs", "journal")
PERIODIC_TABLES = ("schedules", "fires")  # migration v4
CONTROL_TABLES = ("pauses", "cancels")  # migration v5: runtime control
TIMEOUT_TABLES = ("timeouts",)  # migration v6: per-job time limits
ON_DEAD_TABLES = ("on_dead",)  # migration v7: owed on_dead calls
TRACE_TABLES = ("traces",)  # migration v8: trace context
THROTTLE_TABLES = ("throttles",)  # migration v11: throttle starts


def snapshot(bind: sa.Engine | sa.Connection, prefix: str, names: tuple[str, ...] = SEED_TABLES,
             identity_table: str = "journal") -> dict[str, Any]:
    """The catalog of queue ``prefix``'s tables ``names`` (default: the seed's), normalized to ``{{prefix}}``.

    Relations are those named after one of the tables (their indexes, the
    identity sequence), so the tables of later migrations stay out of the
    seed's catalog; the ``<prefix>_alembic_version`` table is left out.
    """
    norm = _normalizer(prefix)
    tables = [f"{prefix}_{name}" for name in names]
    owned = tuple(f"{TOKEN}_{name}" for name in names)

    def rows(conn: sa.Connection, query: sa.TextClause, **params: Any) -> list[tuple[Any, ...]]:
        return sorted(tuple(norm(v) for v in row) for row in conn.execute(query, params))

    def collect(conn: sa.Connection) -> dict[str, Any]:
        relations = rows(conn, RELATIONS, pattern=prefix.replace("_", "!_") + "!_%")
        relations = [r for r in relations if r[0].startswith(owned)]
        return {
            "columns": [tuple(norm(v) for v in row) for row in conn.execute(COLUMNS, {"tables": tables})],
            "constraints": rows(conn, CONSTRAINTS, tables=tables),
            "indexes": rows(conn, INDEXES, tables=tables),
            "identity_sequence": rows(conn, IDENTITY_SEQUENCE, journal=f"{prefix}_{identity_table}")
            if relations and identity_table in names else [],
            "relations": relations,
        }

    if isinstance(bind, sa.Connection):
        return collect(bind)
    with bind.connect() as conn:
        return collect(conn)


def migrated_and_mapped(engine: sa.Engine, prefix: str, names: tuple[str, ...],
                        identity_table: str = "journal") -> tuple[dict[str, Any], dict[str, Any]]:
    """The catalogs of tables ``names``: ``prefix`` migrated to head, then a prefix as long made by ``create_all``."""
    mapped = f"m{prefix}"[: len(prefix)]
    alembic_venturi.upgrade(engine, prefix)
    make_models(mapped).metadata.create_all(engine)
    return (snapshot(engine, prefix, names, identity_table=identity_table),
            snapshot(engine, mapped, names, identity_table=identity_table))


def run_sql(engine: sa.Engine, sql: str, autocommit: bool = False) -> None:
    """Run a multi-statement script through a raw cursor, then commit."""
    raw = engine.raw_connection()
    try:
        if autocommit:
            raw.dbapi_connection.autocommit = True  # type: ignore[union-attr]
        cursor = raw.cursor()
        cursor.execute(sql)
        cursor.close()
        if not autocommit:
            raw.commit()
    finally:
        if autocommit:
            raw.dbapi_connection.autocommit = False  # type: ignore[union-attr]
        raw.close()


def apply_seed(engine: sa.Engine, prefix: str) -> None:
    """Create queue ``prefix`` straight from the seed DDL (the reference schema)."""
    run_sql(engine, SEED_DDL.replace(TOKEN, prefix))


def apply_periodic(engine: sa.Engine, prefix: str) -> None:
    """Add the periodic-job tables to a seeded queue straight from the v4 body (their reference)."""
    run_sql(engine, render_body("v4", prefix))


def relation_names(engine: sa.Engine, prefix: str) -> set[str]:
    with engine.connect() as conn:
        return {r[0] for r in conn.execute(RELATIONS, {"pattern": prefix.replace("_", "!_") + "!_%"})}


def server_major(engine: sa.Engine) -> int:
    """The server's major version (15 for 15.18)."""
    with engine.connect() as conn:
        return int(conn.execute(SERVER_MAJOR).scalar_one())


def expected_constraint_kinds(major: int) -> Counter[tuple[str, str]]:
    """``(table, contype)`` counts the seed DDL creates on a server of version ``major``.

    ``p`` primary key, ``c`` check, ``f`` foreign key; ``n`` NOT NULL from 18 on.
    """
    kinds = Counter({(f"{TOKEN}_jobs", "p"): 1, (f"{TOKEN}_jobs", "c"): 2,
                     (f"{TOKEN}_journal", "p"): 1, (f"{TOKEN}_journal", "c"): 1,
                     (f"{TOKEN}_journal", "f"): 1})
    if major >= NOT_NULL_CONSTRAINTS_SINCE:
        for table, count in SEED_NOT_NULL_COLUMNS.items():
            kinds[(f"{TOKEN}_{table}", "n")] = count
    return kinds
