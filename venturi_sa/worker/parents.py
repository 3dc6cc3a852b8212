"""``ctx.parents``: a dependent's parents, read in the run's checkpoint transaction (not its ``ctx.session``).

Read through the run's store (``DurableBackend.read_parents``): a worker
reads them in a short transaction of its own, committed at once; the testing
helpers read them in the test's session, so they see its uncommitted jobs.
Reading changes nothing, so a rollback or a crash loses nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from venturi_sa.errors import InvalidOption
from venturi_sa.ops.dependents import PARENTS_BATCH
from venturi_sa.storage.durable_params import ParentInfo, ParentsParams

if TYPE_CHECKING:
    from venturi_sa.worker.checkpoint import Checkpointer


class ParentsOf(Protocol):
    """What reading the parents needs of the run's context (``JobContext``)."""

    checkpointer: Checkpointer | None

    @property
    def job_id(self) -> str: ...


def read(ctx: ParentsOf, offset: int = 0, limit: int | None = None) -> list[ParentInfo]:
    """The parents of ``ctx``'s job at positions ``offset``.. (``limit`` of them; all with None), in order."""
    checkpointer = ctx.checkpointer
    backend = checkpointer.backend if checkpointer is not None else None
    if checkpointer is None or checkpointer.begin is None or backend is None:
        raise InvalidOption("ctx.parents needs the queue's store, which this context has none of")
    params = ParentsParams(job_id=ctx.job_id, offset=offset, limit=limit)
    found: list[ParentInfo] = []

    def fetch(tx: Any) -> bool:
        found.extend(backend.read_parents(tx, params))
        return True

    checkpointer.begin(fetch)
    return found


def batches(ctx: ParentsOf, batch: int = PARENTS_BATCH) -> Iterator[ParentInfo]:
    """The parents in order, read ``batch`` at a time (for fan-ins too large to hold at once)."""
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise InvalidOption(f"batch must be a positive int, got {batch!r}")
    offset = 0
    while True:
        rows = read(ctx, offset, batch)
        yield from rows
        if len(rows) < batch:
            return
        offset += batch
