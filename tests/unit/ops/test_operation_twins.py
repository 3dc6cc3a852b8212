"""Every operation of the queue has its ``*_async`` twin, made by the one mechanism: same parameters, same result.

The twins are generated from the sync methods (``venturi_sa.ops.twins``), so
a twin cannot be missing, drop a parameter (``actor=``) or differ; these
tests check that through ``inspect.signature``, and that the objects each
side takes are checked before anything runs.  No database.
"""

from __future__ import annotations

import asyncio
import inspect

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from venturi_sa import Queue, make_models
from venturi_sa.ops.face import Operations
from venturi_sa.ops.twins import OPERATIONS, marks

ENQUEUE_TWINS = {"enqueue_async", "enqueue_many_async"}  # take an AsyncSession; not operations
URL = "postgresql+psycopg2://nobody@localhost:1/none"  # never connected to


def _operations() -> list[str]:
    return sorted(name for name, value in vars(Operations).items() if hasattr(value, "__venturi_operation__"))


def test_the_registry_is_the_methods_marked_on_the_face() -> None:
    assert _operations() == sorted(OPERATIONS)
    assert {"get_job", "result", "kill", "cancel", "cancel_kind", "pauses", "retry_now", "list_schedules",
            "pause_schedule", "resume_schedule", "run_schedule_now"} <= set(OPERATIONS)


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_each_operation_has_a_twin_with_its_signature(name: str) -> None:
    sync, twin = getattr(Queue, name), getattr(Queue, f"{name}_async")
    assert inspect.iscoroutinefunction(twin) and not inspect.iscoroutinefunction(sync)
    assert twin.__name__ == f"{name}_async"
    ours, theirs = inspect.signature(sync), inspect.signature(twin)
    assert list(ours.parameters) == list(theirs.parameters)
    bind = marks(sync).bind
    for param in ours.parameters:
        mine, its = ours.parameters[param], theirs.parameters[param]
        if param == bind:
            assert (mine.annotation, its.annotation) in {
                ("Engine", "AsyncEngine"), ("Session | Engine", "AsyncSession | AsyncEngine"),
                ("Session | Connection | Engine", "AsyncSession | AsyncConnection | AsyncEngine")}
            assert (mine.kind, mine.default) == (its.kind, its.default)
        else:
            assert mine == its, (name, param)
    assert ours.return_annotation == theirs.return_annotation  # an async def: the coroutine returns it


def test_no_async_method_lacks_its_operation() -> None:
    twins = {name for name in dir(Queue) if name.endswith("_async")} - ENQUEUE_TWINS
    assert twins == {f"{name}_async" for name in OPERATIONS}


def test_the_twins_that_drifted_before_take_actor() -> None:
    for name in ("requeue_async", "kill_async", "release_async", "retry_now_async", "cancel_kind_async"):
        assert inspect.signature(getattr(Queue, name)).parameters["actor"].default == "operator"


def test_a_sync_engine_given_to_a_twin_is_refused_before_anything_runs() -> None:
    queue = Queue(make_models("twin"))
    engine = sa.create_engine(URL)
    with pytest.raises(TypeError, match=r"queue.kill_async\(\) takes an AsyncEngine, got a sync Engine: "
                                        r"use `queue.kill\(engine, ...\)`"):
        asyncio.run(queue.kill_async(engine, "j"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"queue.cancel_async\(\) takes an AsyncSession, got a sync Session"):
        asyncio.run(queue.cancel_async(Session(engine), "j"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"queue.pause_schedule\(\) takes an Engine, got str"):
        queue.pause_schedule("engine", "nightly")  # type: ignore[arg-type]


def test_an_async_engine_given_to_a_sync_operation_names_the_twin() -> None:
    pytest.importorskip("greenlet")
    pytest.importorskip("asyncpg")
    from sqlalchemy.ext.asyncio import create_async_engine

    queue = Queue(make_models("twin"))
    engine = create_async_engine(URL.replace("psycopg2", "asyncpg"))
    with pytest.raises(TypeError, match=r"use `await queue.run_schedule_now_async\(engine, ...\)`"):
        queue.run_schedule_now(engine, "nightly")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"use `await queue.cancel_async\(session, ...\)`"):
        from sqlalchemy.ext.asyncio import AsyncSession

        queue.cancel(AsyncSession(engine), "j")  # type: ignore[arg-type]


def test_keywords_reach_the_operation_by_name() -> None:
    queue = Queue(make_models("twin"))
    with pytest.raises(TypeError, match=r"queue.kill\(\) takes an Engine, got NoneType"):
        queue.kill(engine=None, job_id="j", actor="me")  # type: ignore[arg-type]


READS = ("get_job", "explain", "result", "steps", "signals", "parents")


def test_the_reads_of_one_job_join_a_session_or_a_connection() -> None:
    joining = {name for name in OPERATIONS if marks(OPERATIONS[name]).joins_connection}
    assert joining == set(READS)
    assert {name for name in OPERATIONS if marks(OPERATIONS[name]).joins_session} == {*READS, "cancel", "signal"}


@pytest.mark.parametrize("name", READS)
def test_a_read_given_the_wrong_object_names_what_it_takes(name: str) -> None:
    queue = Queue(make_models("twin"))
    engine = sa.create_engine(URL)
    with pytest.raises(TypeError, match=rf"queue.{name}\(\) takes an Engine, a Session or a Connection, got str"):
        getattr(queue, name)("engine", "01HXXXXXXXXXXXXXXXXXXXXXXX")
    with pytest.raises(TypeError, match=rf"queue.{name}_async\(\) takes an AsyncSession, got a sync Session: "
                                        rf"use `queue.{name}\(session, ...\)`"):
        asyncio.run(getattr(queue, f"{name}_async")(Session(engine), "01HXXXXXXXXXXXXXXXXXXXXXXX"))
    with pytest.raises(TypeError, match=rf"queue.{name}_async\(\) takes an AsyncEngine, an AsyncSession or an "
                                        rf"AsyncConnection, got int"):
        asyncio.run(getattr(queue, f"{name}_async")(3, "01HXXXXXXXXXXXXXXXXXXXXXXX"))


def test_an_async_connection_given_to_a_sync_read_names_the_twin() -> None:
    pytest.importorskip("greenlet")
    pytest.importorskip("asyncpg")
    from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

    queue = Queue(make_models("twin"))
    connection = AsyncConnection(create_async_engine(URL.replace("psycopg2", "asyncpg")))  # never connected
    with pytest.raises(TypeError, match=r"queue.steps\(\) takes a sync Connection, got an AsyncConnection: "
                                        r"use `await queue.steps_async\(connection, ...\)`"):
        queue.steps(connection, "01HXXXXXXXXXXXXXXXXXXXXXXX")  # type: ignore[arg-type]
