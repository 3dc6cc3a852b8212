"""The worker's storage seam: :class:`Backend`, the verbs a second store must provide.

It holds what the worker does to the queue's jobs: claim, finish_many,
renew, recover, soonest_visible, checkpoint and ping, and the
:class:`Transactions` the worker runs them in.  Each verb takes a
transaction handle (``tx``: whatever the store's ``Transactions`` hands to
``fn``; for SQLAlchemy a ``Connection`` or ``Session`` in the caller's
transaction; a verb never commits) and one frozen params object of
:mod:`~venturi_sa.storage.params`, and returns venturi's own records from
there (never a database row).  Pauses in force, cancel requests and owed
``on_dead`` calls are read and written inside these verbs (a paused kind is
not claimed; a cancel request rides ``renew`` and turns a retry, or a
recovery, into ``dead``).  What a handler records (``ctx.step``,
``ctx.sleep``, ``ctx.wait_for``) and reads (``ctx.parents``) goes through
the second seam beside this one,
:class:`~venturi_sa.storage.durable_backend.DurableBackend`, which both
implementations also provide.  The worker reaches two things outside both
seams, PostgreSQL-only maintenance with no memory twin: the archiver
(``storage/archive.py``) and the making of owed ``on_dead`` calls
(``storage/owed_calls.py``).

Two implementations: :class:`SqlAlchemyBackend` (PostgreSQL; its SQL is in
the topic modules beside this one) and
:class:`~venturi_sa.storage.memory.MemoryBackend` (tests only).
``tests/integration/conformance`` runs the worker-verb and durable-verb tests on both.  Everything else
(enqueue, operations, schedules, the dashboard) calls its topic module,
``venturi_sa.storage.<topic>``, directly: those are PostgreSQL features with
one implementation, not part of the seam.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa

from venturi_sa.models import Models
from venturi_sa.states import Outcome
from venturi_sa.storage import checkpoint, claim, leases, limited_claim, outcomes, recovery, throttled_claim
from venturi_sa.storage.params import (
    CheckpointParams,
    ClaimedJob,
    ClaimParams,
    Fence,
    FinishManyParams,
    PingParams,
    RecoveredJob,
    RecoverParams,
    RenewParams,
    RenewResult,
    Runner,
    SoonestParams,
)
from venturi_sa.storage.sql_steps import SqlSteps

T = TypeVar("T")

Tx = Any
"""A transaction handle: what a backend's :class:`Transactions` pass to ``fn`` (a sync SQLAlchemy
``Connection`` or ``Session``; a :class:`~venturi_sa.storage.memory.MemoryTx`)."""


class Transactions(Protocol):
    """Where the worker's verbs run: ``fn`` gets the store's transaction handle.

    For SQLAlchemy, ``venturi_sa.worker.connections`` (``SyncConnections``,
    ``AsyncConnections``) over the worker's engine; the memory backend is its
    own.
    """

    def begin(self, fn: Callable[[Tx], T]) -> T:
        """``fn(tx)`` in a transaction committed when it returns (rolled back, nothing kept, if it raises)."""

    def connect(self, fn: Callable[[Tx], T]) -> T:
        """``fn(tx)`` with no transaction committed for it (reads and ``ping``)."""


class Backend(Protocol):
    """The worker's verbs.  Nothing here commits: the caller's transaction decides."""

    prefix: str

    def claim(self, tx: Tx, params: ClaimParams) -> list[ClaimedJob]:
        """Claim up to ``params.limit`` eligible jobs (pending, visible, not paused, not row-locked).

        At most ``params.caps[kind]`` of a capped kind; ``run_count`` + 1 and a
        lease of the kind's length; returned in claim order (priority, then
        ``created_at``, then id).  A job of a kind in ``params.throttles``
        whose key started less than a window ago is sent back unclaimed in
        the same transaction (PostgreSQL only; the memory backend ignores it).
        """

    def finish_many(self, tx: Tx, params: FinishManyParams) -> dict[Fence, Outcome]:
        """Write each run's outcome and journal row if its fence still holds; returns what each held fence recorded.

        A stale fence (another claimed_by or run_count, or the job no longer
        claimed) writes nothing and is absent from the result.  A run sent
        back to ``pending`` while a cancel request is stored ends ``dead``
        instead, and the result says ``dead`` (the statement's own report,
        no read after it); a ``dead`` ending of a cancel or of
        ``owe_on_dead`` owes an ``on_dead`` call; a terminal job's cancel
        request goes.  The caller's commit keeps it all, its rollback none.
        """

    def renew(self, tx: Tx, params: RenewParams) -> RenewResult:
        """Extend the held runs' leases without waiting on row locks; says which lost their claim or have a
        cancel request."""

    def recover(self, tx: Tx, params: RecoverParams) -> list[RecoveredJob]:
        """Return expired claims of the known kinds to ``pending`` (``dead`` at the kind's backstop or with
        a cancel request, owing ``on_dead``), journaled ``stale-recovered`` (or ``dead``); each
        :class:`RecoveredJob` says the outcome it recorded."""

    def soonest_visible(self, tx: Tx, params: SoonestParams) -> float | None:
        """Seconds until the soonest future ``visible_at`` of a pending job of the kinds, or None."""

    def checkpoint(self, tx: Tx, params: CheckpointParams) -> bool:
        """Save a running job's carry if its run still holds the claim (fenced); True if written."""

    def ping(self, tx: Tx, params: PingParams) -> None:
        """One round trip: raises if the store cannot be reached."""


_PING = sa.select(sa.literal(1))


def ping(runner: Runner) -> None:
    """One round trip (``SELECT 1``): raises if the database cannot be reached."""
    runner.execute(_PING)


class SqlAlchemyBackend(SqlSteps):
    """The PostgreSQL implementation of :class:`Backend` for one queue's models (``tx``: a ``Runner``).

    Its durable-step verbs (:class:`~venturi_sa.storage.durable_backend.DurableBackend`)
    come from :class:`~venturi_sa.storage.sql_steps.SqlSteps`.
    """

    def __init__(self, models: Models) -> None:
        self.models = models
        self.prefix = models.prefix

    def claim(self, tx: Runner, params: ClaimParams) -> list[ClaimedJob]:
        return throttled_claim.claim(self.models, tx, params)  # throttled -> limited -> plain

    def finish_many(self, tx: Runner, params: FinishManyParams) -> dict[Fence, Outcome]:
        held = outcomes.finish_many(self.models, tx, params)
        limited_claim.wake_if_limited(self.models, tx, (fence.kind for fence in held))
        return held

    def renew(self, tx: Runner, params: RenewParams) -> RenewResult:
        return leases.renew(self.models, tx, params)

    def recover(self, tx: Runner, params: RecoverParams) -> list[RecoveredJob]:
        recovered = recovery.recover(self.models, tx, params)
        limited_claim.wake_if_limited(self.models, tx, (job.kind for job in recovered))
        return recovered

    def soonest_visible(self, tx: Runner, params: SoonestParams) -> float | None:
        soonest = claim.seconds_until_visible(self.models, tx, params)
        slot = limited_claim.seconds_until_rate_slot(self.models, tx, params.kinds)
        return slot if soonest is None or (slot is not None and slot < soonest) else soonest

    def checkpoint(self, tx: Runner, params: CheckpointParams) -> bool:
        return checkpoint.write_checkpoint(self.models, tx, params)

    def ping(self, tx: Runner, params: PingParams) -> None:
        ping(tx)


@lru_cache(maxsize=256)
def backend_for(models: Models) -> SqlAlchemyBackend:
    """The SQLAlchemy backend of ``models`` (one per mapped-classes object)."""
    return SqlAlchemyBackend(models)
