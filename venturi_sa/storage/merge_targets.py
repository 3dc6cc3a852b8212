"""Which pending jobs may absorb an enqueue: the exclusions of every merge target lookup.

A merge target (dedup's ``Coalesce``, debounce, throttle) is a pending job of
the same kind and dedup key.  Some pending jobs must not be claimed yet for
reasons of their own, and merging into them would change a job that is not
simply waiting for its time.  The rule, one for every feature:

====================================  ==========================  ===============
pending job                           ``visible_at``              merge target?
====================================  ==========================  ===============
waiting on parents                    ``'infinity'``              no
sleeping (a step's sleep)             its wake time               no
waiting for a signal                  its deadline or infinity    no
held by a limit                       <= now                      **yes**
delayed, in backoff, debounced,       a time                      yes
throttled
====================================  ==========================  ===============

:func:`merge_target_exclusions` is the one place these exclusions are
written; :func:`venturi_sa.storage.enqueue.oldest_pending_sibling` applies
it.  A feature that adds a pending state that must not absorb enqueues
adds its clause there (with the table that records the state).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from venturi_sa.models import Models
from venturi_sa.storage import steps
from venturi_sa.storage.timestamps import INFINITY


def merge_target_exclusions(models: Models) -> list[Any]:
    """WHERE clauses a merge target must satisfy besides ``pending``, its kind and its dedup key.

    Exclusion point: add one clause per pending state that is not a target.
    """
    job = models.Job
    return [
        job.visible_at != INFINITY,  # waiting on parents: released by its last parent's outcome, not merged into
        # sleeping, waiting for a signal, or with recorded steps: a row in the steps table (v13)
        sa.not_(steps.has_entries(models, job)),
        # held by a limit: deliberately NOT excluded (visible_at <= now; it merges like any pending job)
    ]


__all__ = ["merge_target_exclusions"]
