"""A job's durable steps on its dashboard page, interleaved with the journal lines the page shows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from venturi_sa.ops.job_steps import StepInfo, TimelineRow, timeline


def steps_timeline(journal: Sequence[Any], steps: Sequence[StepInfo]) -> list[TimelineRow]:
    """The page's steps, sleeps and waits with its journal entries in time order; empty for a page without
    steps.  Reads nothing: both lists are pages of :func:`~venturi_sa.ops.job_sections.job_sections`."""
    return timeline(journal, steps) if steps else []
