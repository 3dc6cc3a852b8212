"""The PostgreSQL implementation of :class:`~venturi_sa.storage.durable_backend.DurableBackend`.

:class:`SqlSteps` is mixed into ``SqlAlchemyBackend``: each verb is one call
of ``storage/steps.py`` or ``storage/dependent_reads.py`` in the caller's
transaction (a ``Runner``), which commits or rolls back what it wrote.
The writes lock the job row ``FOR KEY SHARE`` under the run's fence first
(see :mod:`venturi_sa.storage.steps`).
"""

from __future__ import annotations

from venturi_sa.models import Models
from venturi_sa.storage import dependent_reads, steps
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
from venturi_sa.storage.params import Runner


class SqlSteps:
    """The PostgreSQL implementation of :class:`DurableBackend` (``tx``: a ``Runner``), mixed into
    ``SqlAlchemyBackend``."""

    models: Models

    def read_steps(self, tx: Runner, params: StepsParams) -> StepsRead:
        records, now = steps.load(self.models, tx, params.job_id)
        return StepsRead(records=records, now=now)

    def record_step(self, tx: Runner, params: RecordStepParams) -> StepInfo | None:
        return steps.record_step(self.models, tx, params.fence, params.name, params.result, params.elapsed)

    def reach_sleep(self, tx: Runner, params: SleepParams) -> Reached | None:
        return steps.reach_sleep(self.models, tx, params.fence, params.name, params.delay, params.until)

    def reach_wait(self, tx: Runner, params: WaitParams) -> Reached | None:
        return steps.reach_wait(self.models, tx, params.fence, params.name, params.timeout)

    def wake_wait(self, tx: Runner, params: WakeWaitParams) -> None:
        steps.suspend_wait(self.models, tx, params.fence, params.name, params.deadline)

    def read_parents(self, tx: Runner, params: ParentsParams) -> list[ParentInfo]:
        return dependent_reads.parents(self.models, tx, params)
