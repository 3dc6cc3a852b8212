"""Durable progress: a running handler saves its carry mid-run (``ctx.checkpoint``, ``ctx.progress``).

Each checkpoint is one short transaction of its own on the worker's engine
(one round trip: a fenced ``UPDATE ... RETURNING``), committed before
``checkpoint()`` returns, so the application reads it at once through
``queue.get_job(...).carry``.  It is fenced like an outcome write: a run
whose claim is gone (a zombie after its lease was recovered) writes nothing
and gets :class:`~venturi_sa.errors.LeaseLost`.  If the worker dies, the
next run starts from the last checkpoint's carry; the handler's
``ctx.session`` work is not part of a checkpoint (it still commits with the
outcome).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from numbers import Real
from typing import Any, ParamSpec, Protocol, TypeVar

from marshmallow import Schema

from venturi_sa import payloads
from venturi_sa.errors import InvalidOption, LeaseLost
from venturi_sa.storage.backend import Tx
from venturi_sa.storage.durable_backend import WorkerBackend
from venturi_sa.storage.params import CheckpointParams, Fence

P = ParamSpec("P")
R = TypeVar("R")


class BlockingCall(InvalidOption):
    """A sync ``ctx`` call from an ``async def`` handler whose statements run on the handler's own loop.

    Under ``drain_async`` (the test's loop) and on a worker with an async
    engine (the worker's loop) the call would wait for the loop it blocks.
    Raised by that run's ``begin``; the ``ctx`` method re-raises it as an
    ``InvalidOption`` naming its ``*_async`` twin (:func:`names_twin`).
    """


def names_twin(call: str, twin: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate the sync ``ctx.<call>`` so that a :class:`BlockingCall` names ``await ctx.<twin>(...)``."""
    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def named(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except BlockingCall:
                raise InvalidOption(f"ctx.{call}() from an async def handler would block the event loop that "
                                    f"runs its statements: use `await ctx.{twin}(...)`") from None
        return named
    return decorate


PROGRESS_KEY = "progress"
"""The carry key ``ctx.progress()`` writes: ``{"done": n, "total": m, "message": text}``."""


class CheckpointedRun(Protocol):
    """What a checkpoint reads and sets of the run's context (``JobContext``)."""

    carry: Any
    max_payload_bytes: int

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]: ...

    def mark_lease_lost(self) -> bool: ...


class Checkpointer:
    """What one run needs to checkpoint: the fence, the carry schema, and where to write.

    ``begin(fn)`` runs ``fn`` in the checkpoint's transaction and commits
    (the worker's connection runner; the testing helpers' own session).
    ``backend`` is the run's store: its ``checkpoint`` verb, and the
    durable-step verbs ``ctx.step`` and friends and ``ctx.parents`` use
    (``storage/durable_backend.py``).  With ``backend`` None nothing is
    written (``venturi_sa.testing.perform``, which has no database) and the
    carry is only checked and kept.  Read-only by
    contract (a slotted class: the worker builds one per claimed job).
    """

    __slots__ = ("fence", "carry_schema", "backend", "begin")

    def __init__(self, fence: Fence, carry_schema: Schema | None, backend: WorkerBackend | None = None,
                 begin: Callable[[Callable[[Tx], bool]], bool] | None = None) -> None:
        self.fence = fence
        self.carry_schema = carry_schema
        self.backend = backend
        self.begin = begin

    def write(self, ctx: CheckpointedRun, carry: Any, note: str | None) -> None:
        """Dump ``carry`` through the schema, write it fenced and commit; set ``ctx.carry`` on success.

        A carry that is not JSON or is over ``ctx.max_payload_bytes`` raises
        ``InvalidPayload`` before anything is written.
        """
        bound = ctx.max_payload_bytes
        stored = payloads.dump(self.carry_schema, carry, "checkpoint carry", bound) if (
            self.carry_schema is not None and carry is not None) else carry
        stored = payloads.ensure_json(stored, "checkpoint carry", bound)
        written = True
        if self.backend is not None and self.begin is not None:
            backend, params = self.backend, CheckpointParams(fence=self.fence, carry=stored)
            written = self.begin(lambda runner: backend.checkpoint(runner, params))
        if not written:
            ctx.mark_lease_lost()
            raise LeaseLost(f"job {self.fence.job_id} run {self.fence.run_count} no longer holds its claim: "
                            "the checkpoint wrote nothing, and the run's outcome will not be recorded")
        ctx.carry = carry
        ctx.log.debug("checkpoint%s", f": {note}" if note else "")


def with_progress(carry: Any, schema: Schema | None, done: float, total: float | None,
                  message: str | None) -> dict[str, Any]:
    """``carry`` (None or a dict) with its ``progress`` entry set; ``InvalidOption`` if it cannot hold one."""
    for name, value in (("done", done), ("total", total)):
        if value is None and name == "total":
            continue
        if isinstance(value, bool) or not isinstance(value, Real) or value < 0:
            raise InvalidOption(f"ctx.progress({name}=...) must be a non-negative number, got {value!r}")
    if message is not None and not isinstance(message, str):
        raise InvalidOption(f"ctx.progress(message=...) must be a string, got {type(message).__name__}")
    if carry is not None and not isinstance(carry, dict):
        raise InvalidOption(f"ctx.progress() stores {{'{PROGRESS_KEY}': ...}} in the carry, which is a "
                            f"{type(carry).__name__}; use ctx.checkpoint(carry=...) instead")
    if schema is not None and PROGRESS_KEY not in schema.fields:
        raise InvalidOption(f"ctx.progress() stores {{'{PROGRESS_KEY}': ...}} in the carry: add "
                            f"`{PROGRESS_KEY} = fields.Dict()` to {type(schema).__name__}")
    return {**(carry or {}), PROGRESS_KEY: {"done": done, "total": total, "message": message}}
