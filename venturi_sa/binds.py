"""Which SQLAlchemy object a public call takes, and a clear ``TypeError`` naming the right call otherwise.

Enqueue joins the caller's transaction, so it takes a ``Session`` (sync
calls) or an ``AsyncSession`` (the ``*_async`` calls).  The operations open
their own short transactions, so they take an ``Engine`` or an
``AsyncEngine``; the reads also take a ``Connection`` (an ``AsyncConnection``)
or a ``Session`` (an ``AsyncSession``) and then read in its transaction.
Passing one kind where another is expected raises before anything runs
(nothing is added, nothing is awaited, nothing is opened), with a message
saying which call or object to use instead.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TypeGuard

import sqlalchemy as sa
from sqlalchemy.orm import Session, scoped_session

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession


def is_async(obj: object, *names: str) -> bool:
    """``isinstance(obj, sqlalchemy.ext.asyncio.<name>)`` for any of ``names``, without importing it.

    The asyncio extension needs greenlet, which the core install does not
    require; an object of one of its classes can only exist once the
    application imported it, so an unimported module means "no".
    """
    module = sys.modules.get("sqlalchemy.ext.asyncio")
    return module is not None and isinstance(obj, tuple(getattr(module, n) for n in names))


def is_async_engine(obj: object) -> TypeGuard[AsyncEngine]:
    return is_async(obj, "AsyncEngine")


def is_async_session(obj: object) -> TypeGuard[AsyncSession]:
    return is_async(obj, "AsyncSession")


def _what(obj: object) -> str:
    return type(obj).__name__


def _not_a_session(obj: object, call: str, wanted: str, opener: str, full_name: str) -> TypeError:
    """The error for an Engine, a Connection or anything else given where a session is needed."""
    article = "an" if wanted[0] in "AEIOU" else "a"
    if isinstance(obj, sa.Engine) or is_async_engine(obj):
        return TypeError(f"queue.{call}() joins your transaction, so it takes {article} {wanted}, not an "
                         f"{_what(obj)}: open one (`{opener} {wanted}(engine) as session, session.begin(): "
                         f"...`) and commit it yourself")
    if isinstance(obj, sa.Connection) or is_async(obj, "AsyncConnection"):
        return TypeError(f"queue.{call}() takes {article} {wanted}, not a {_what(obj)}: wrap the connection "
                         f"(`{wanted}(bind=connection)`) to enqueue in its transaction")
    if _is_extension(obj):
        return TypeError(f"queue.{call}() takes {article} {wanted}, got the {_what(obj)} extension object: "
                         f"pass its session (`db.session`)")
    return TypeError(f"queue.{call}() takes a {full_name}, got {_what(obj)}")


def _is_extension(obj: object) -> bool:
    """A framework's database object holding both a session and an engine (Flask-SQLAlchemy's ``db``)."""
    try:
        session = getattr(obj, "session", None)
    except Exception:  # noqa: BLE001 - a property that needs a context; not what we look for
        return False
    return isinstance(session, (Session, scoped_session)) and hasattr(type(obj), "engine")


def require_session(obj: object, call: str) -> Session:
    """``obj`` if it is a sync ``Session`` (a ``scoped_session``, e.g. Flask-SQLAlchemy's
    ``db.session``, stands for its current session); a ``TypeError`` naming the right call otherwise."""
    if isinstance(obj, Session):
        return _on_a_sync_driver(obj, call)
    if isinstance(obj, scoped_session):
        current: Session = obj()
        return _on_a_sync_driver(current, call)
    if is_async_session(obj):
        raise TypeError(f"queue.{call}() takes a sync Session, got an AsyncSession: "
                        f"use `await queue.{call}_async(session, ...)`")
    raise _not_a_session(obj, call, "Session", "with", "sqlalchemy.orm.Session")


def _on_a_sync_driver(session: Session, call: str) -> Session:
    """``session`` unless it is bound to a sync ``Engine`` on an async driver (and no AsyncSession drives it)."""
    dialect = getattr(session.bind, "dialect", None)
    if dialect is None or not dialect.is_async:
        return session
    module = sys.modules.get("sqlalchemy.ext.asyncio")
    if module is not None and module.async_session(session) is not None:
        return session  # the sync side of an AsyncSession, inside run_sync
    raise TypeError(f"queue.{call}() got a Session on the async driver {dialect.driver!r}, which has no sync "
                    f"API: open an AsyncSession on create_async_engine(...) and use "
                    f"`await queue.{call}_async(session, ...)`")


def require_async_session(obj: object, call: str) -> AsyncSession:
    """``obj`` if it is an ``AsyncSession``; a ``TypeError`` naming the right call otherwise."""
    if is_async_session(obj):
        return obj
    if is_async(obj, "async_scoped_session"):
        return obj()  # type: ignore[operator, no-any-return]
    sync_call = call.removesuffix("_async")
    if isinstance(obj, Session):
        raise TypeError(f"queue.{call}() takes an AsyncSession, got a sync Session: "
                        f"use `queue.{sync_call}(session, ...)`")
    raise _not_a_session(obj, call, "AsyncSession", "async with", "sqlalchemy.ext.asyncio.AsyncSession")


def _engine_hint(obj: object) -> str:
    if isinstance(obj, Session) or is_async_session(obj):
        return "it opens its own short transaction; pass the session's engine (`session.get_bind()`)"
    if isinstance(obj, sa.Connection) or is_async(obj, "AsyncConnection"):
        return "it opens its own short transactions; pass the engine (`connection.engine`)"
    if isinstance(obj, scoped_session) or is_async(obj, "async_scoped_session"):
        return ("it opens its own short transactions; pass the engine (`db.engine` with Flask-SQLAlchemy, "
                "or `session.get_bind()`)")
    if _is_extension(obj):
        return "pass its engine (`db.engine`)"
    return "pass the application's engine"


def require_connection(obj: object, call: str) -> sa.Connection:
    """``obj`` if it is a sync ``Connection``; a ``TypeError`` naming the right call otherwise."""
    if isinstance(obj, sa.Connection):
        return obj
    if is_async(obj, "AsyncConnection"):
        raise TypeError(f"queue.{call}() takes a sync Connection, got an AsyncConnection: "
                        f"use `await queue.{call}_async(connection, ...)`")
    raise TypeError(f"queue.{call}() takes a Connection, got {_what(obj)}")


def require_async_connection(obj: object, call: str) -> AsyncConnection:
    """``obj`` if it is an ``AsyncConnection``; a ``TypeError`` naming the right call otherwise."""
    if is_async(obj, "AsyncConnection"):
        return obj  # type: ignore[return-value]
    if isinstance(obj, sa.Connection):
        raise TypeError(f"queue.{call}() takes an AsyncConnection, got a sync Connection: "
                        f"use `queue.{call.removesuffix('_async')}(connection, ...)`")
    raise TypeError(f"queue.{call}() takes an AsyncConnection, got {_what(obj)}")


def require_engine(obj: object, call: str, also: str = "") -> sa.Engine:
    """``obj`` if it is a sync ``Engine``; a ``TypeError`` naming the right call otherwise.

    ``also`` names the other objects the call takes (``", a Session or a Connection"``).
    """
    if isinstance(obj, sa.Engine):
        if obj.dialect.is_async:
            raise TypeError(f"queue.{call}() got a sync Engine on the async driver {obj.dialect.driver!r}: "
                            f"create it with create_async_engine() and use `await queue.{call}_async(...)`")
        return obj
    if is_async_engine(obj):
        raise TypeError(f"queue.{call}() takes a sync Engine, got an AsyncEngine: "
                        f"use `await queue.{call}_async(engine, ...)`")
    if also:
        hint = ": pass its session (`db.session`) or its engine (`db.engine`)" if _is_extension(obj) else ""
        raise TypeError(f"queue.{call}() takes an Engine{also}, got {_what(obj)}{hint}")
    raise TypeError(f"queue.{call}() takes an Engine, got {_what(obj)}: {_engine_hint(obj)}")


def require_async_engine(obj: object, call: str, also: str = "") -> AsyncEngine:
    """``obj`` if it is an ``AsyncEngine``; a ``TypeError`` naming the right call otherwise (``also``: as above)."""
    if is_async_engine(obj):
        return obj
    if isinstance(obj, sa.Engine):
        raise TypeError(f"queue.{call}() takes an AsyncEngine, got a sync Engine: "
                        f"use `queue.{call.removesuffix('_async')}(engine, ...)`")
    if also:
        raise TypeError(f"queue.{call}() takes an AsyncEngine{also}, got {_what(obj)}")
    raise TypeError(f"queue.{call}() takes an AsyncEngine, got {_what(obj)}: {_engine_hint(obj)}")


def require_worker_engine(obj: Any) -> sa.Engine | AsyncEngine:
    """A worker runs on an ``Engine`` or an ``AsyncEngine``; anything else is refused."""
    if isinstance(obj, sa.Engine) or is_async_engine(obj):
        return obj
    raise TypeError(f"Worker() takes an Engine or an AsyncEngine, got {_what(obj)}: "
                    f"a worker opens its own connections; {_engine_hint(obj)}")
