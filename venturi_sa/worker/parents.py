"""``ctx.parents``: a dependent's parents, read in the run's checkpoint transaction (not its ``ctx.session``).

A worker reads them in a short transaction of its own, committed at once;
the testing helpers read them in the test's session, so they see its
uncommitted jobs.  Reading changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from venturi_sa.errors import InvalidOption
from venturi_sa.ops.dependents import PARENTS_BATCH, ParentInfo, parent_rows

if TYPE_CHECKING:
    from venturi_sa.worker.context import JobContext


def read(ctx: JobContext, offset: int = 0, limit: int | None = None) -> list[ParentInfo]:
    """The parents of ``ctx``'s job at positions ``offset``.. (``limit`` of them; all with None), in order."""
    checkpointer = ctx.checkpointer
    models = getattr(getattr(checkpointer, "backend", None), "models", None)
    if checkpointer is None or checkpointer.begin is None or models is None:
        raise InvalidOption("ctx.parents needs the queue's database, which this context has none of")
    found: list[ParentInfo] = []

    def fetch(tx: Any) -> bool:
        found.extend(parent_rows(models, tx, ctx.job_id, offset, limit))
        return True

    checkpointer.begin(fetch)
    return found


def batches(ctx: JobContext, batch: int = PARENTS_BATCH) -> Iterator[ParentInfo]:
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
