"""The tables of durable steps and signals (migration v13): ``<prefix>_steps`` and ``<prefix>_signals``.

A step row is a recorded ``ctx.step`` result, a durable sleep's wake time or
a wait's deadline and resolution (column ``entry``); a signal row is one
``queue.signal`` for one job and name.  Both go with their job (``ON DELETE
CASCADE``).  Named as in :mod:`~venturi_sa.models.job_tables`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.sql.elements import conv

from venturi_sa.models.column_types import json_column_type
from venturi_sa.models.job_tables import in_list
from venturi_sa.prefix import Names

ENTRIES = ("step", "sleep", "wait")
"""What a steps row records: a step's result, a sleep's wake time, a wait's deadline and resolution."""
RESOLUTIONS = ("signal", "timeout")
"""How a wait ended: a signal came (its payload is the row's ``result``), or its deadline passed."""


class StepBase:
    """Columns of every prefix's ``Step`` class: one recorded step, sleep or wait of a job."""

    __venturi_prefix__: str
    job_id: Mapped[str]
    name: Mapped[str]
    entry: Mapped[str]
    result: Mapped[Any]
    run_no: Mapped[int]
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    wake_at: Mapped[datetime | None]
    resolution: Mapped[str | None]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<Step {self.job_id} {self.entry} {self.name!r}>"


class SignalBase:
    """Columns of every prefix's ``Signal`` class: one signal sent to a job."""

    __venturi_prefix__: str
    job_id: Mapped[str]
    name: Mapped[str]
    payload: Mapped[Any]
    sent_at: Mapped[datetime]

    if TYPE_CHECKING:

        def __init__(self, **columns: Any) -> None: ...

    def __repr__(self) -> str:
        return f"<Signal {self.job_id} {self.name!r}>"


def steps_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("job_id", "name", name=conv(n.index("steps_pkey"))),
        sa.ForeignKeyConstraint(["job_id"], [f"{n.jobs}.id"], ondelete="CASCADE",
                                name=conv(n.index("steps_job_id_fkey"))),
        sa.CheckConstraint(in_list("entry", ENTRIES), name=conv(n.index("steps_entry_check"))),
        sa.CheckConstraint(in_list("resolution", RESOLUTIONS), name=conv(n.index("steps_resolution_check"))),
    )


def steps_columns() -> dict[str, Any]:
    tz = sa.DateTime(timezone=True)
    return {
        "job_id": mapped_column(sa.Text),
        "name": mapped_column(sa.Text),
        "entry": mapped_column(sa.Text, nullable=False),
        "result": mapped_column(json_column_type(), nullable=True),
        "run_no": mapped_column(sa.Integer, nullable=False),
        "started_at": mapped_column(tz, nullable=False),
        "finished_at": mapped_column(tz, nullable=True),
        "wake_at": mapped_column(tz, nullable=True),
        "resolution": mapped_column(sa.Text, nullable=True),
    }


def signals_args(n: Names) -> tuple[Any, ...]:
    return (
        sa.PrimaryKeyConstraint("job_id", "name", name=conv(n.index("signals_pkey"))),
        sa.ForeignKeyConstraint(["job_id"], [f"{n.jobs}.id"], ondelete="CASCADE",
                                name=conv(n.index("signals_job_id_fkey"))),
    )


def signals_columns() -> dict[str, Any]:
    return {
        "job_id": mapped_column(sa.Text),
        "name": mapped_column(sa.Text),
        "payload": mapped_column(json_column_type(), nullable=True),
        "sent_at": mapped_column(sa.DateTime(timezone=True), nullable=False),
    }


def step_classes(prefix: str, base: Any, table_class: Callable[..., Any]) -> dict[str, Any]:
    """``{"Step": ..., "Signal": ...}``: the mapped classes of the two tables, made by ``table_class``."""
    n = Names(prefix)
    return {
        "Step": table_class(prefix, base, StepBase, "Step", n.index("steps"), steps_args(n), steps_columns()),
        "Signal": table_class(prefix, base, SignalBase, "Signal", n.index("signals"), signals_args(n),
                              signals_columns()),
    }
