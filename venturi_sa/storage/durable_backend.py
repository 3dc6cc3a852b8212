"""The worker's second seam: :class:`DurableBackend`, what ``ctx.step``, ``ctx.sleep``, ``ctx.wait_for`` and
``ctx.parents`` need of a store.

Beside :class:`~venturi_sa.storage.backend.Backend` (the claim/outcome
verbs), with the same shape: each verb takes a transaction handle (``tx``,
what the store's ``Transactions`` hand to ``fn``) and one frozen params
object of :mod:`~venturi_sa.storage.durable_params`, returns venturi's own
records from there, and never commits: the caller's transaction decides.
Every write is fenced on the run's claim: a run whose claim is gone writes
nothing and gets None back.  :class:`WorkerBackend` is both protocols, what
the worker's checkpointer holds.

Two implementations: :class:`~venturi_sa.storage.sql_steps.SqlSteps`, mixed into
``SqlAlchemyBackend`` (its SQL is in ``storage/steps.py``, ``storage/signals.py``
and ``storage/dependent_reads.py``), and
:class:`~venturi_sa.storage.memory_steps.MemorySteps`, mixed into
``MemoryBackend``.  ``tests/integration/conformance/test_durable_verbs.py``
runs the contract on both.
"""

from __future__ import annotations

from typing import Protocol

from venturi_sa.storage.backend import Backend, Tx
from venturi_sa.storage.durable_params import (
    ParentInfo,
    ParentsParams,
    Reached,
    RecordStepParams,
    SleepParams,
    StepInfo,
    StepsParams,
    StepsRead,
    WaitParams,
    WakeWaitParams,
)


class DurableBackend(Protocol):
    """The durable-step verbs.  Nothing here commits: the caller's transaction decides."""

    def read_steps(self, tx: Tx, params: StepsParams) -> StepsRead:
        """Every recorded step, sleep and wait of the job by name, and the store's clock now."""

    def record_step(self, tx: Tx, params: RecordStepParams) -> StepInfo | None:
        """Record a step's result if the run still holds its claim; the record (an earlier one of that name
        if it exists), or None if fenced out (nothing written)."""

    def reach_sleep(self, tx: Tx, params: SleepParams) -> Reached | None:
        """Record a sleep's wake time unless recorded (fenced); its record and the clock, or None if fenced
        out."""

    def reach_wait(self, tx: Tx, params: WaitParams) -> Reached | None:
        """Record a wait's deadline unless recorded (fenced), and resolve it: ``signal`` if a signal of its
        name was stored before the deadline (its payload the result), ``timeout`` at or past the deadline;
        None if fenced out."""

    def wake_wait(self, tx: Tx, params: WakeWaitParams) -> None:
        """In a suspended wait's outcome transaction, after the fenced ``paused`` write: make the job
        visible now if the signal is stored, else at the deadline (never, without one)."""

    def read_parents(self, tx: Tx, params: ParentsParams) -> list[ParentInfo]:
        """The job's parents in ``after=`` order (a slice of them); reads only."""


class WorkerBackend(Backend, DurableBackend, Protocol):
    """Both of the worker's seams: what a run's checkpointer writes through."""
