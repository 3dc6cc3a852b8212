"""What the same-run A/B scripts share (ab_drain, ab_enqueue, scaling): the no-op queue and a fresh database."""

from __future__ import annotations

from typing import Any


def noop_queue(prefix: str) -> Any:
    """``(queue, noop)``: a queue of ``prefix`` with one task, ``noop`` (payload ``{"seq": int}``), doing nothing."""
    from marshmallow import Schema, fields

    import venturi_sa

    class NoopPayload(Schema):
        seq = fields.Integer(required=True)

    queue = venturi_sa.Queue(venturi_sa.make_models(prefix))

    @queue.task("noop", payload=NoopPayload)
    def noop(payload: Any, ctx: Any) -> None:
        return None

    return queue, noop


def fresh_database(port: int | None, database: str, prefix: str) -> tuple[Any, str, Any]:
    """``(cluster, dsn, admin)``: ``database`` dropped and created on the server at ``port`` (or on a new
    throwaway cluster with ``bench/run.py``'s settings, returned so the caller stops it; else None), migrated
    for ``prefix``; ``admin`` is an autocommit psycopg2 connection to its ``postgres`` database."""
    import psycopg2
    import sqlalchemy as sa
    from run import PG_SETTINGS

    import alembic_venturi
    from venturi_sa.throwaway import ThrowawayCluster

    cluster = None if port else ThrowawayCluster(PG_SETTINGS).start()
    port = port or cluster.port  # type: ignore[union-attr]
    dsn = f"postgresql+psycopg2://postgres@127.0.0.1:{port}/{database}"
    admin = psycopg2.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres")
    admin.autocommit = True
    admin.cursor().execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    admin.cursor().execute(f"CREATE DATABASE {database}")
    engine = sa.create_engine(dsn)
    alembic_venturi.upgrade(engine, prefix)
    engine.dispose()
    return cluster, dsn, admin
