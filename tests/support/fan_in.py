"""Big single jobs built with SQL: a fan-in with many parents, a debounce target merged many times.

The rows are what ``after=`` and a dedup merge write (``storage/dependents.link``,
``storage/enqueue``): parent jobs, one ``<prefix>_parents`` row per parent
(its position from 0, ``done`` for a terminal parent), the dependent's
``<prefix>_waits`` count and its ``'infinity'`` ``visible_at``; and one
``merged`` journal row per absorbed enqueue.  One statement each, so 100,000
parents cost seconds, not 100,000 enqueues.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

FAN_IN = """
INSERT INTO {jobs} (id, kind, payload, status, created_at, visible_at, finished_at, run_count)
SELECT :stem || lpad(i::text, 10, '0'), 'part', jsonb_build_object('i', i),
       CASE WHEN i <= :completed THEN 'completed' ELSE 'pending' END,
       now(), now(), CASE WHEN i <= :completed THEN now() END, CASE WHEN i <= :completed THEN 1 ELSE 0 END
FROM generate_series(1, :parents) AS i;
INSERT INTO {jobs} (id, kind, payload, status, created_at, visible_at)
VALUES (:stem || 'ZZZZZZZZZZ', 'gather', '{{}}'::jsonb, 'pending', now(), 'infinity');
INSERT INTO {parents} (job_id, position, parent_id, policy, done)
SELECT :stem || 'ZZZZZZZZZZ', i - 1, :stem || lpad(i::text, 10, '0'), 'cancel', i <= :completed
FROM generate_series(1, :parents) AS i;
INSERT INTO {waits} (job_id, remaining, not_before, killed_by)
VALUES (:stem || 'ZZZZZZZZZZ', :parents - :completed, now(), NULL);
"""

MERGED = """
INSERT INTO {jobs} (id, kind, payload, status, created_at, visible_at, dedup_key)
VALUES (:job_id, 'debounced', '{{}}'::jsonb, 'pending', now(), now() + interval '1 hour', 'key');
INSERT INTO {journal} (job_id, kind, run_no, recorded_at, outcome, note)
SELECT :job_id, 'debounced', 0, now() + make_interval(secs => i), 'merged', 'merged enqueue ' || i
FROM generate_series(1, :merges) AS i;
"""


def _names(models: Any) -> dict[str, str]:
    return {"jobs": models.names.jobs, "journal": models.names.journal,
            "parents": models.workflow.parents_table.name, "waits": models.workflow.waits_table.name}


def fan_stem(stem: str) -> str:
    """The 16 characters every id of a seeded fan-in starts with: ``stem`` made a ULID's leading part."""
    return ("0" + stem.upper()).ljust(16, "0")


def parent_id(stem: str, i: int) -> str:
    """The id of parent ``i`` (1-based) of the fan-in seeded with ``stem`` (a job id in ULID form)."""
    return fan_stem(stem) + str(i).zfill(10)


def seed_fan_in(engine: sa.Engine, models: Any, stem: str, parents: int, completed: int) -> str:
    """A pending dependent waiting on ``parents`` parents, the first ``completed`` of them completed; its id.

    Parent ``i`` (1-based) has id :func:`parent_id`; every id is in ULID form."""
    with engine.begin() as conn:
        conn.execute(sa.text(FAN_IN.format(**_names(models))),
                     {"stem": fan_stem(stem), "parents": parents, "completed": completed})
    return fan_stem(stem) + "Z" * 10


def seed_merged(engine: sa.Engine, models: Any, job_id: str, merges: int) -> str:
    """A pending job with ``merges`` consecutive ``merged`` journal rows (a debounce key merged that often)."""
    with engine.begin() as conn:
        conn.execute(sa.text(MERGED.format(**_names(models))), {"job_id": job_id, "merges": merges})
    return job_id
