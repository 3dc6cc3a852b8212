"""``venturi jobs show``'s durable steps, sleeps and waits, interleaved with the job's journal, as text."""

from __future__ import annotations

from collections.abc import Sequence

from venturi_sa.cli.output import table
from venturi_sa.ops.job_steps import StepInfo, timeline
from venturi_sa.ops.records import JournalInfo

TIMELINE_HEADERS = ("at", "run", "entry", "name / outcome", "took", "detail")


def render_steps(journal: Sequence[JournalInfo], steps: Sequence[StepInfo]) -> str:
    """The job's steps interleaved with its journal, as text (empty for a job without steps)."""
    if not steps:
        return ""
    rows = [[r.at, r.run_no, r.entry, r.name, r.took, r.detail] for r in timeline(journal, steps)]
    return f"\n\nsteps and journal:\n{table(TIMELINE_HEADERS, rows, right=('run',))}"


__all__ = ["TIMELINE_HEADERS", "render_steps"]
