"""One mechanism for every operation's ``*_async`` twin: the sync method, run in SQLAlchemy's greenlet bridge.

:func:`operation` marks a sync method of :class:`~venturi_sa.ops.face.Operations`
(its first argument after ``self`` is the ``Engine``; with :func:`joins_session`
also a ``Session``, with :func:`joins_transaction` a ``Session`` or a
``Connection``), records it in :data:`OPERATIONS` and checks that argument
before anything runs (``TypeError`` naming the right call, from
:mod:`venturi_sa.binds`), and its ``job_id`` argument if it has one (``InvalidJobId``
unless a ULID).  :func:`async_twin` makes the ``*_async`` method
from it: the same code, given ``AsyncEngine.sync_engine`` and run inside
``greenlet_spawn`` (an ``AsyncSession`` or ``AsyncConnection`` through
``run_sync``, in its transaction), so the twin's guarantees are the sync ones word for word and a
twin cannot be missing a parameter or differ.  The only thing a sync
operation does that would block an event loop is waiting: it waits through
:func:`nap`, which sleeps with ``asyncio.sleep`` when it runs inside a twin.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, overload

import sqlalchemy as sa
from sqlalchemy.orm import Session, scoped_session
from sqlalchemy.util import greenlet_spawn

from venturi_sa.binds import (
    is_async,
    require_async_connection,
    require_async_engine,
    require_async_session,
    require_connection,
    require_engine,
    require_session,
)
from venturi_sa.models.job_ids import check_job_id

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")
F = TypeVar("F", bound=Callable[..., Any])

OPERATIONS: dict[str, Callable[..., Any]] = {}
"""Every operation by name (the checked sync method); each has an ``<name>_async`` twin on the class."""

blocking_sleep: Callable[[float], None] = time.sleep
"""How a sync operation waits outside a twin (a test replaces it to prove the twins never call it)."""

_BRIDGED: ContextVar[bool] = ContextVar("venturi_sa_bridged", default=False)
"""True while a twin runs its sync operation (the greenlet shares the awaiting task's context)."""


@dataclass(frozen=True)
class Marks:
    """What :func:`operation` records on the method it returns."""

    raw: Callable[..., Any]  # the method as written: no check of its engine argument
    bind: str  # the name of that argument
    joins_session: bool  # it also takes a Session (and its twin an AsyncSession)
    joins_connection: bool = False  # it also takes a Connection (and its twin an AsyncConnection)

    @property
    def also(self) -> str:
        """The objects it takes besides an engine, for its ``TypeError`` ("" if none)."""
        return ", a Session or a Connection" if self.joins_connection else ""

    @property
    def also_async(self) -> str:
        """The async objects its twin takes besides an ``AsyncEngine`` ("" if none)."""
        return ", an AsyncSession or an AsyncConnection" if self.joins_connection else ""


def joins_session(fn: F) -> F:
    """Under :func:`operation`: the operation also takes a ``Session`` and then runs in its transaction."""
    fn.__venturi_joins_session__ = True  # type: ignore[attr-defined]
    return fn


def joins_transaction(fn: F) -> F:
    """Under :func:`operation`: a read that also takes a ``Session`` or a ``Connection`` and reads in its transaction.

    The method then gets the caller's object itself and must never commit,
    roll back or close it (:func:`venturi_sa.ops.transaction.reading`).
    """
    fn.__venturi_joins_connection__ = True  # type: ignore[attr-defined]
    return joins_session(fn)


def marks(fn: Callable[..., Any]) -> Marks:
    """The marks of an operation; ``TypeError`` for anything else."""
    found = getattr(fn, "__venturi_operation__", None)
    if not isinstance(found, Marks):
        raise TypeError(f"{getattr(fn, '__name__', fn)!r} is not an @operation")
    return found


def _sync_bind(obj: object, call: str, found: Marks) -> Session | sa.Connection | sa.Engine:
    if found.joins_session and (isinstance(obj, (Session, scoped_session)) or is_async(obj, "AsyncSession")):
        return require_session(obj, call)
    if found.joins_connection and (isinstance(obj, sa.Connection) or is_async(obj, "AsyncConnection")):
        return require_connection(obj, call)
    return require_engine(obj, call, found.also)


def operation(fn: F) -> F:
    """Mark ``fn`` an operation: its engine argument is checked, and it is listed in :data:`OPERATIONS`."""
    signature = inspect.signature(fn)
    found = Marks(raw=fn, bind=list(signature.parameters)[1],
                  joins_session=bool(getattr(fn, "__venturi_joins_session__", False)),
                  joins_connection=bool(getattr(fn, "__venturi_joins_connection__", False)))

    @functools.wraps(fn)
    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        bound.arguments[found.bind] = _sync_bind(bound.arguments[found.bind], fn.__name__, found)
        _check_ids(bound)
        return fn(*bound.args, **bound.kwargs)

    checked.__venturi_operation__ = found  # type: ignore[attr-defined]
    OPERATIONS[fn.__name__] = checked
    return checked  # type: ignore[return-value]


def _check_ids(bound: inspect.BoundArguments) -> None:
    """An operation's ``job_id`` argument must be a ULID (``InvalidJobId`` before any SQL)."""
    if "job_id" in bound.arguments:
        check_job_id(bound.arguments["job_id"])


def twin_signature(signature: inspect.Signature, found: Marks) -> inspect.Signature:
    """``signature`` with the engine argument annotated for the async objects (annotations are strings here)."""
    annotation = ("AsyncSession | AsyncConnection | AsyncEngine" if found.joins_connection
                  else "AsyncSession | AsyncEngine" if found.joins_session else "AsyncEngine")
    return signature.replace(parameters=[p.replace(annotation=annotation) if p.name == found.bind else p
                                         for p in signature.parameters.values()])


@overload
def async_twin(fn: Callable[Concatenate[S, Session | sa.Connection | sa.Engine, P], R],
               ) -> Callable[Concatenate[S, AsyncSession | AsyncConnection | AsyncEngine, P],
                             Coroutine[Any, Any, R]]: ...


@overload
def async_twin(fn: Callable[Concatenate[S, Session | sa.Engine, P], R],
               ) -> Callable[Concatenate[S, AsyncSession | AsyncEngine, P], Coroutine[Any, Any, R]]: ...


@overload
def async_twin(fn: Callable[Concatenate[S, sa.Engine, P], R],
               ) -> Callable[Concatenate[S, AsyncEngine, P], Coroutine[Any, Any, R]]: ...


def async_twin(fn: Callable[..., Any]) -> Callable[..., Coroutine[Any, Any, Any]]:
    """The ``*_async`` method of operation ``fn``: ``fn`` as written, on the async object's sync side.

    An ``AsyncEngine`` runs it on ``engine.sync_engine`` inside
    ``greenlet_spawn`` (its own short transactions, as the sync call); an
    ``AsyncSession`` (operations marked :func:`joins_session`) or an
    ``AsyncConnection`` (:func:`joins_transaction`) runs it through
    ``run_sync``, in the caller's transaction, never committed.  The wrong
    object raises ``TypeError`` before anything runs.
    """
    found = marks(fn)
    name = f"{fn.__name__}_async"
    signature = inspect.signature(found.raw)

    async def twin(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        given = bound.arguments[found.bind]

        def in_caller(sync: Session | sa.Connection) -> Any:
            bound.arguments[found.bind] = sync
            return found.raw(*bound.args, **bound.kwargs)

        if found.joins_session and (isinstance(given, Session) or is_async(given, "AsyncSession",
                                                                           "async_scoped_session")):
            session = require_async_session(given, name)
            _check_ids(bound)
            return await _bridged(session.run_sync(in_caller))
        if found.joins_connection and (isinstance(given, sa.Connection) or is_async(given, "AsyncConnection")):
            connection = require_async_connection(given, name)
            _check_ids(bound)
            return await _bridged(connection.run_sync(in_caller))
        bound.arguments[found.bind] = require_async_engine(given, name, found.also_async).sync_engine
        _check_ids(bound)
        return await _bridged(greenlet_spawn(found.raw, *bound.args, **bound.kwargs))

    twin.__name__ = name
    twin.__qualname__ = f"{fn.__qualname__}_async"
    twin.__module__ = fn.__module__
    joined = ("an ``AsyncSession`` or ``AsyncConnection``" if found.joins_connection
              else "an ``AsyncSession``" if found.joins_session else "")
    twin.__doc__ = (f":meth:`{fn.__name__}` on an ``AsyncEngine``"
                    f"{f' or in {joined} (its transaction, never committed)' if joined else ''}"
                    f": the same code, run in SQLAlchemy's greenlet bridge.")
    twin.__signature__ = twin_signature(signature, found)  # type: ignore[attr-defined]
    twin.__venturi_twin_of__ = fn  # type: ignore[attr-defined]
    return twin


async def _bridged(step: Coroutine[Any, Any, R]) -> R:
    token = _BRIDGED.set(True)
    try:
        return await step
    finally:
        _BRIDGED.reset(token)


def nap(seconds: float) -> None:
    """Sleep ``seconds``: ``asyncio.sleep`` inside a twin (the event loop keeps running), else ``time.sleep``."""
    if _BRIDGED.get():
        from sqlalchemy.util import await_only

        await_only(asyncio.sleep(seconds))
    else:
        blocking_sleep(seconds)
