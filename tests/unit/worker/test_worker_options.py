"""``WorkerOptions``: the options object and the keyword form build the same worker; checks in one place.

No database: building a ``Worker`` connects to nothing (its start does).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from marshmallow import Schema
from sqlalchemy.orm import Session

from venturi_sa import InvalidOption, JobContext, Queue, Task, Worker, WorkerApp, WorkerOptions, make_models
from venturi_sa.worker.worker_options import OPTION_NAMES, WorkerKeywords


class Ping(Task):
    KIND = "ping"

    class Payload(Schema):
        pass

    def run(self, ctx: JobContext) -> None:
        return None


class Pong(Ping):
    KIND = "pong"


class OwnSession(Session):
    pass


def started(worker: Worker) -> None:
    return None


@contextlib.contextmanager
def scope(ctx: JobContext) -> Iterator[None]:
    yield


def on_event(name: str, data: dict[str, Any]) -> None:
    return None


EVERY_OPTION: dict[str, Any] = dict(
    kinds=["pong"], concurrency=3, poll_interval=0.5, batch_size=7, listen=False, grace=2.0,
    recover_interval=4.0, worker_id="w-1", batch_outcomes=False, fetch_cooldown=0.0, max_backlog=9,
    connect_timeout=5.0, session_class=OwnSession, async_session_class=None, on_event=on_event,
    on_start=started, on_stop=[started], around_run=scope)

CONFIG = ("kinds", "concurrency", "poll_interval", "batch_size", "listen", "grace", "recover_interval", "worker_id",
          "batch_outcomes", "fetch_cooldown", "max_backlog", "connect_timeout", "session_class",
          "async_session_class", "on_event", "hooks")


@pytest.fixture(scope="module")
def queue() -> Queue:
    return Queue(make_models("wopts"), [Ping, Pong])


@pytest.fixture(scope="module")
def engine() -> Iterator[sa.Engine]:
    made = sa.create_engine("postgresql+psycopg2://nobody@127.0.0.1:1/none")  # never connected
    yield made
    made.dispose()


def config(worker: Worker) -> dict[str, Any]:
    return {name: getattr(worker, name) for name in CONFIG}


def test_the_options_object_and_the_keywords_build_the_same_worker(queue: Queue, engine: sa.Engine) -> None:
    by_keywords = Worker(queue, engine, **EVERY_OPTION)
    by_object = Worker(queue, engine, options=WorkerOptions(**EVERY_OPTION))
    assert by_keywords.options == by_object.options
    assert config(by_keywords) == config(by_object)
    assert by_object.kinds == ["pong"] and by_object.concurrency == 3 and by_object.max_backlog == 9
    assert by_object.session_class is OwnSession and by_object.hooks.on_stop == (started,)


def test_the_defaults_agree(queue: Queue, engine: sa.Engine) -> None:
    plain, given = Worker(queue, engine), Worker(queue, engine, WorkerOptions())
    assert plain.options == given.options == WorkerOptions()
    assert config(plain) == config(given)
    assert plain.max_backlog == 100 and plain.worker_id  # resolved by the worker: max(4 x 10, 100), host:pid


def test_every_option_has_its_keyword() -> None:
    assert set(WorkerKeywords.__annotations__) == OPTION_NAMES == set(EVERY_OPTION)


@pytest.mark.parametrize(("name", "value", "message"), [
    ("concurrency", 0, "concurrency must be >= 1, got 0"),
    ("poll_interval", 0, "poll_interval must be > 0, got 0"),
    ("fetch_cooldown", -1, "fetch_cooldown must be >= 0, got -1"),
    ("max_backlog", 0, "max_backlog must be >= 1, got 0"),
    ("kinds", "ping", "kinds takes a list of kinds, got the string 'ping'"),
    ("on_start", [1], "on_start takes a callable or a list of callables, got 1"),
])
def test_a_bad_value_is_refused_the_same_way_in_both_forms(queue: Queue, engine: sa.Engine, name: str,
                                                            value: Any, message: str) -> None:
    with pytest.raises(InvalidOption) as built:
        WorkerOptions(**{name: value})
    with pytest.raises(InvalidOption) as keyword:
        Worker(queue, engine, **{name: value})
    assert str(built.value) == str(keyword.value) == message


def test_an_option_given_twice_is_refused_naming_it(queue: Queue, engine: sa.Engine) -> None:
    options = WorkerOptions(concurrency=4)
    with pytest.raises(InvalidOption, match=r"options= and concurrency=, grace=: set concurrency, grace"):
        Worker(queue, engine, options=options, concurrency=4, grace=1.0)
    worker = Worker(queue, engine, options=dataclasses.replace(options, grace=1.0))
    assert (worker.concurrency, worker.grace) == (4, 1.0)


def test_the_engines_stay_worker_arguments_beside_options(queue: Queue, engine: sa.Engine) -> None:
    with pytest.raises(InvalidOption, match="Worker got a sync Engine and sync_engine="):  # it reached the engines
        Worker(queue, engine, WorkerOptions(concurrency=2), sync_engine=engine)
    with pytest.raises(TypeError, match="sync_engine"):
        WorkerOptions(sync_engine=engine)  # type: ignore[call-arg]


def test_options_must_be_a_worker_options(queue: Queue, engine: sa.Engine) -> None:
    with pytest.raises(InvalidOption, match="options takes a venturi_sa.WorkerOptions, got dict"):
        Worker(queue, engine, options={"concurrency": 2})  # type: ignore[arg-type]


def test_a_worker_app_builds_the_same_options(queue: Queue, engine: sa.Engine) -> None:
    app = WorkerApp(queue, engine, on_start=started, options={"concurrency": 3, "grace": 2.0})
    worker = app.worker(kinds=["ping"], grace=1.0)
    assert worker.options == WorkerOptions(kinds=["ping"], concurrency=3, grace=1.0, on_start=started)
