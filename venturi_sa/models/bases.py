"""The typing aids of the mapped classes: the columns each prefix's ``Job``, ``JournalEntry``, ... has.

:func:`~venturi_sa.models.make_models` puts one of these under each mapped
class it builds; they hold annotations and ``__repr__`` only, no mapping.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Mapped


class JobBase:
    """Columns and helpers shared by every prefix's ``Job`` class (typing aid)."""

    __venturi_prefix__: str
    id: Mapped[str]
    kind: Mapped[str]
    payload: Mapped[Any]
    priority: Mapped[int]
    status: Mapped[str]
    created_at: Mapped[datetime]
    visible_at: Mapped[datetime]
    claim_expires_at: Mapped[datetime | None]
    claimed_by: Mapped[str | None]
    finished_at: Mapped[datetime | None]
    run_count: Mapped[int]
    failure_count: Mapped[int]
    carry: Mapped[Any]
    dedup_key: Mapped[str | None]

    if TYPE_CHECKING:
        time_limit: Mapped[JobTimeoutBase | None]
        """The job's own time limit row (``<prefix>_timeouts``), saved with the job; None: its task's."""

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<Job {self.id} {self.kind} {self.status}>"


class JournalEntryBase:
    """Columns shared by every prefix's ``JournalEntry`` class (typing aid)."""

    __venturi_prefix__: str
    id: Mapped[int]
    job_id: Mapped[str]
    kind: Mapped[str]
    run_no: Mapped[int]
    recorded_at: Mapped[datetime]
    outcome: Mapped[str]
    note: Mapped[str | None]
    attachment: Mapped[Any]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<JournalEntry {self.job_id} run {self.run_no} {self.outcome}>"


class ScheduleRowBase:
    """Columns of every prefix's ``Schedule`` class: one declared schedule (typing aid)."""

    __venturi_prefix__: str
    name: Mapped[str]
    kind: Mapped[str]
    payload: Mapped[Any]
    priority: Mapped[int]
    timing: Mapped[str]
    tz: Mapped[str]
    catch_up: Mapped[str]
    overlap: Mapped[str]
    next_at: Mapped[datetime]
    last_at: Mapped[datetime | None]
    last_job: Mapped[str | None]
    paused: Mapped[bool]
    removed_at: Mapped[datetime | None]
    fired: Mapped[int]
    skipped: Mapped[int]
    updated: Mapped[datetime]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...


class PauseBase:
    """Columns of every prefix's ``Pause`` class: one pause of a kind (``'*'`` = every kind)."""

    __venturi_prefix__: str
    id: Mapped[int]
    kind: Mapped[str]
    reason: Mapped[str | None]
    actor: Mapped[str]
    paused_at: Mapped[datetime]
    resume_at: Mapped[datetime | None]
    resumed_at: Mapped[datetime | None]
    resumed_by: Mapped[str | None]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<Pause {self.kind} by {self.actor}>"


class FireRowBase:
    """Columns of every prefix's ``Fire`` class: one fired (schedule, fire time) (typing aid)."""

    __venturi_prefix__: str
    schedule: Mapped[str]
    fire_at: Mapped[datetime]
    job_id: Mapped[str]
    fired_at: Mapped[datetime]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...


class CancelRequestBase:
    """Columns of every prefix's ``CancelRequest`` class: a durable cancel of a claimed job."""

    __venturi_prefix__: str
    job_id: Mapped[str]
    run_no: Mapped[int]
    actor: Mapped[str]
    note: Mapped[str | None]
    created_at: Mapped[datetime]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<CancelRequest {self.job_id} run {self.run_no} by {self.actor}>"


class JobTimeoutBase:
    """Columns of every prefix's ``JobTimeout`` class: one job's own time limit (overrides ``Task.timeout``)."""

    __venturi_prefix__: str
    job_id: Mapped[str]
    timeout: Mapped[timedelta]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<JobTimeout {self.job_id} {self.timeout}>"


class OwedDeadCallBase:
    """Columns of every prefix's ``OwedDeadCall`` class: an ``on_dead`` call a worker of ``kind`` still owes."""

    __venturi_prefix__: str
    id: Mapped[int]
    job_id: Mapped[str]
    kind: Mapped[str]
    run_no: Mapped[int]
    note: Mapped[str | None]
    actor: Mapped[str]
    created_at: Mapped[datetime]
    attempts: Mapped[int]
    not_before: Mapped[datetime]
    last_error: Mapped[str | None]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<OwedDeadCall {self.job_id} run {self.run_no} by {self.actor}>"


class TraceContextBase:
    """Columns of every prefix's ``TraceContext`` class: the trace context a job was enqueued in."""

    __venturi_prefix__: str
    job_id: Mapped[str]
    carrier: Mapped[dict[str, str]]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<TraceContext {self.job_id} {self.carrier.get('traceparent')}>"



class ArchivedJobBase:
    """Columns of every prefix's ``ArchivedJob`` class: a terminal job moved to the archive (typing aid)."""

    __venturi_prefix__: str
    id: Mapped[str]
    kind: Mapped[str]
    status: Mapped[str]
    created_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    moved_at: Mapped[datetime]
    job: Mapped[dict[str, Any]]
    journal: Mapped[list[dict[str, Any]]]
    timeout: Mapped[timedelta | None]
    trace: Mapped[dict[str, str] | None]
    steps: Mapped[list[dict[str, Any]] | None]
    signals: Mapped[list[dict[str, Any]] | None]
    limit_key: Mapped[str | None]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<ArchivedJob {self.id} {self.kind} {self.status} archived {self.moved_at}>"
