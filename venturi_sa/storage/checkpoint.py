"""The checkpoint write: a running job's carry saved mid-run, fenced on the run's claim."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.models import Models
from venturi_sa.states import Status
from venturi_sa.storage.params import CheckpointParams, Runner

_STATEMENTS: dict[tuple[str, int], Any] = {}


def checkpoint_statement(models: Models) -> Any:
    """``UPDATE jobs SET carry = :carry WHERE <fence> RETURNING id``: one round trip, no journal row."""
    key = (models.prefix, id(models.Job))
    if key not in _STATEMENTS:
        job = models.jobs_table.c
        _STATEMENTS[key] = (
            sa.update(models.jobs_table)
            .where(job.id == sa.bindparam("c_id", type_=sa.Text),
                   job.status == Status.CLAIMED.value,
                   job.claimed_by == sa.bindparam("c_claimed_by", type_=sa.Text),
                   job.run_count == sa.bindparam("c_run_count", type_=sa.Integer))
            .values(carry=sa.cast(sa.bindparam("c_carry", type_=sa.Text), postgresql.JSONB))
            .returning(job.id)
        )
    return _STATEMENTS[key]


def write_checkpoint(models: Models, runner: Runner, params: CheckpointParams) -> bool:
    """Write the carry if the fence still holds; False (nothing written) if the claim is gone.

    The caller commits; a checkpoint never changes status, lease or counters.
    """
    fence = params.fence
    row = runner.execute(checkpoint_statement(models), {
        "c_id": fence.job_id, "c_claimed_by": fence.claimed_by, "c_run_count": fence.run_count,
        "c_carry": json.dumps(params.carry)}).first()
    return row is not None
