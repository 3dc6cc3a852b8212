"""The throttle table (migration v11): the last start of each throttled ``(kind, dedup key)``.

``Task.throttle`` allows one start per window per key.  The worker's claim
writes the start here (one upsert, only when it claimed a throttled kind);
an enqueue of a throttled kind reads it to schedule a new job at the last
start plus the window.  No foreign key to the job: the start must outlive
its job's cleanup and archiving.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.sql.elements import conv

from venturi_sa.prefix import Names


def throttles_name(n: Names) -> str:
    """``<prefix>_throttles``."""
    return n.index("throttles")


def throttles_args(n: Names) -> tuple[Any, ...]:
    return (sa.PrimaryKeyConstraint("kind", "key", name=conv(n.index("throttles_pkey"))),)


def throttles_columns() -> dict[str, Any]:
    return {
        "kind": mapped_column(sa.Text, nullable=False),
        "key": mapped_column(sa.Text, nullable=False),
        "began_at": mapped_column(sa.DateTime(timezone=True), nullable=False),
        "job_id": mapped_column(sa.Text, nullable=False),
    }


class ThrottleStartBase:
    """Columns of every prefix's ``ThrottleStart`` class: when a throttled key's last run started, and which job."""

    __venturi_prefix__: str
    kind: Mapped[str]
    key: Mapped[str]  # the jobs' dedup_key
    began_at: Mapped[Any]
    job_id: Mapped[str]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<ThrottleStart {self.kind} {self.key!r} {self.began_at}>"
