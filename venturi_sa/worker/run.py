"""One run of one job inside a worker: its claim, context, state and, once known, its outcome."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

from venturi_sa.run_hooks import NO_HOOKS, RunHooks
from venturi_sa.states import Outcome
from venturi_sa.storage.params import ClaimedJob, Fence, FinishParams
from venturi_sa.task import Task
from venturi_sa.worker.context import JobContext
from venturi_sa.worker.loop import LoopTask


class RunState(enum.Enum):
    """Where a run is.  Changed only under the in-flight registry's lock."""

    QUEUED = "queued"  # claimed, waiting for an executor thread
    RUNNING = "running"  # its handler is in progress: a stop past the grace period releases it
    PERSISTING = "persisting"  # its outcome is decided and being written: a stop lets the write finish
    FINISHED = "finished"  # its outcome is persisted (or given up on)
    RELEASED = "released"  # given back at shutdown: nothing of it may be persisted


@dataclass(eq=False, slots=True)
class Run:
    """A claimed job on its way through the executor and the completer.

    Identity is the object (``eq=False``); the worker keys runs by
    :attr:`fence`, ``(job id, run number)``, because one job can be in a
    worker twice (run n still running after an operator release, run n+1
    reclaimed).
    """

    job: ClaimedJob
    ctx: JobContext
    task_type: type[Task] | None = None
    task: Task | None = None
    params: FinishParams | None = None  # the outcome the run decided (what it asks the write to record)
    recorded: Outcome | None = None  # what the fenced write recorded (``dead`` if a stored cancel turned it)
    failed: bool = False  # the handler raised: its session work must be rolled back
    duration: float = 0.0  # seconds the pipeline (decode, handler, classify) took
    state: RunState = field(default=RunState.QUEUED)
    holds_slot: bool = False  # from its claim until the pipeline frees it (InFlight.free_slot)
    running: LoopTask | None = None  # while an async handler runs: its task on the worker loop
    hooks: RunHooks = NO_HOOKS  # the worker's around_run (venturi_sa/run_hooks.py)
    hook_error: str | None = None  # what the task's outcome hook raised (worker/outcome_hooks.py)
    # The monotonic time after which its handler is not started: its lease, as of the claim or the latest
    # renewal, may have run out (worker/inflight.py).  Infinite for a run no worker claimed (testing helpers).
    start_deadline: float = math.inf

    @property
    def fence(self) -> Fence:
        return self.job.fence

    @property
    def released(self) -> bool:
        return self.state is RunState.RELEASED

    def cancel_task(self) -> None:
        """Cancel the run's ``async def`` handler, if one is running (its slot stays held until it ends)."""
        running = self.running
        if running is not None:
            running.cancel()

    def rerun(self) -> None:
        """Reset what one execution of the handler left, to run it again under the same claim."""
        self.ctx = self.ctx.fresh()
        self.task = None
        self.params = None
        self.recorded = None
        self.failed = False
