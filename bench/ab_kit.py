"""What the bench scripts share (ab_drain, ab_enqueue, scaling, adverse, profile_drain): the no-op queue,
the server (``--port`` or a throwaway cluster) and a fresh database."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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


def start_server(port: int | None) -> tuple[Any, int]:
    """``(cluster, port)``: the server at ``port`` (cluster None), or a new throwaway durable cluster with
    ``bench/run.py``'s settings, which the caller stops."""
    from run import PG_SETTINGS

    from venturi_sa.devtools.throwaway import ThrowawayCluster

    if port:
        return None, port
    cluster = ThrowawayCluster(PG_SETTINGS).start()
    return cluster, cluster.port


@contextmanager
def server(port: int | None) -> Iterator[int]:
    """The port of the server at ``port``, or of a throwaway cluster (:func:`start_server`) stopped on exit."""
    cluster, port = start_server(port)
    try:
        yield port
    finally:
        if cluster is not None:
            cluster.stop()


def release(cluster: Any, admin: Any) -> None:
    """Close :func:`fresh_database`'s ``admin`` connection and stop its throwaway ``cluster`` (if it made one)."""
    admin.close()
    if cluster is not None:
        cluster.stop()


def load() -> str:
    """The load averages, for a line of a same-run result."""
    import os

    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def fresh_database(port: int | None, database: str, prefix: str) -> tuple[Any, str, Any]:
    """``(cluster, dsn, admin)``: ``database`` dropped and created on the server at ``port`` (or on a new
    throwaway cluster, :func:`start_server`'s, returned so the caller stops it; else None), migrated
    for ``prefix``; ``admin`` is an autocommit psycopg2 connection to its ``postgres`` database."""
    import psycopg2
    import sqlalchemy as sa

    import alembic_venturi

    cluster, port = start_server(port)
    dsn = f"postgresql+psycopg2://postgres@127.0.0.1:{port}/{database}"
    admin = psycopg2.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres")
    admin.autocommit = True
    admin.cursor().execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    admin.cursor().execute(f"CREATE DATABASE {database}")
    engine = sa.create_engine(dsn)
    alembic_venturi.upgrade(engine, prefix)
    engine.dispose()
    return cluster, dsn, admin
