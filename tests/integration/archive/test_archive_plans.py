"""What the archive's statements read: each day's own indexes, never a scan of a day that holds jobs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import sqlalchemy as sa
from support.archives import attach_days, noon, put
from support.ops import nodes, plan_of

from venturi_sa.storage import archive, archive_reads, dependent_reads, stats
from venturi_sa.storage.history import HistoryParams

PER_DAY = 3000


def reads(plan: dict[str, Any]) -> tuple[set[str], set[str]]:
    """``(indexes used, relations read by a sequential scan)``."""
    used = {n["Index Name"] for n in nodes(plan) if "Index Name" in n}
    scanned = {n["Relation Name"] for n in nodes(plan) if n["Node Type"] == "Seq Scan"}
    return used, scanned


def test_archive_reads_use_each_days_indexes(engine: sa.Engine, models: Any) -> None:
    first = datetime.now(timezone.utc).date() - timedelta(days=3)
    days = attach_days(engine, models, first, 3)
    a = models.archive_table
    with engine.begin() as conn:
        for n, day in enumerate(days):
            at = noon(first + timedelta(days=n))
            conn.execute(sa.text(
                f"INSERT INTO {a.name} (id, kind, status, created_at, finished_at, moved_at, job, journal) "
                "SELECT :day || lpad(g::text, 8, '0'), 'k' || (g % 3), CASE WHEN g % 10 = 0 THEN 'dead' "
                "ELSE 'completed' END, :at - g * interval '1 second', :at, :at, '{}'::jsonb, '[]'::jsonb "
                "FROM generate_series(1, :n) AS g"), {"day": day[-8:], "at": at, "n": PER_DAY})
        conn.execute(sa.text(f"ANALYZE {a.name}"))
    put(engine, models, "probe", noon(first) + timedelta(hours=1), noon(first))
    with engine.begin() as conn:
        conn.execute(sa.text(f"ANALYZE {a.name}"))

    used, scanned = reads(plan_of(engine, archive_reads.job_view_statement(models, "probe")))
    assert used >= {f"{day}_pkey" for day in days} and not scanned & set(days)
    used, scanned = reads(plan_of(engine, archive_reads.history_statement_both(models, HistoryParams(limit=50))))
    assert {f"{day}_created" for day in days} & used and not scanned & set(days)
    used, scanned = reads(plan_of(engine, archive_reads.history_statement_both(
        models, HistoryParams(statuses=("dead",), kind="k1", limit=50))))
    assert not scanned & set(days)
    used, scanned = reads(plan_of(engine, sa.text(stats.PAIR_COUNTS.format(table=a.name))))
    assert {f"{day}_history" for day in days} & used and not scanned & set(days)


def test_a_move_walks_jobs_finished_from_its_floor(engine: sa.Engine, models: Any) -> None:
    jobs = models.jobs_table
    with engine.begin() as conn:
        conn.execute(sa.text(
            f"INSERT INTO {jobs.name} (id, kind, payload, status, created_at, visible_at, finished_at) "
            "SELECT 'j' || lpad(g::text, 8, '0'), 'k', '{}', CASE WHEN g % 4 = 0 THEN 'pending' ELSE 'completed' "
            "END, now(), now(), CASE WHEN g % 4 = 0 THEN NULL ELSE now() - g * interval '1 second' END "
            "FROM generate_series(1, 20000) AS g"))
        conn.execute(sa.text(f"ANALYZE {jobs.name}"))
    used, scanned = reads(plan_of(engine, archive.move_statement(models).bindparams(
        after=timedelta(minutes=1), batch_size=1000, floor=datetime.now(timezone.utc) - timedelta(hours=2))))
    assert {models.names.index("jobs_finished"), models.names.index("jobs_pkey")} <= used
    assert jobs.name not in scanned


def test_the_parents_read_probes_each_parent_by_primary_key(engine: sa.Engine, models: Any) -> None:
    first = datetime.now(timezone.utc).date() - timedelta(days=2)
    days = attach_days(engine, models, first, 2)
    a = models.archive_table
    with engine.begin() as conn:
        for n, day in enumerate(days):  # each archived job names the one before it in after=
            at = noon(first + timedelta(days=n))
            conn.execute(sa.text(
                f"INSERT INTO {a.name} (id, kind, status, created_at, finished_at, moved_at, job, journal) "
                "SELECT :day || lpad(g::text, 8, '0'), 'k', 'completed', :at, :at, :at, "
                "jsonb_build_object('after', jsonb_build_array(jsonb_build_object('position', 0, 'parent_id', "
                ":day || lpad((g - 1)::text, 8, '0'), 'policy', 'cancel', 'done', true))), "
                "jsonb_build_array(jsonb_build_object('id', g, 'outcome', 'completed', 'attachment', g)) "
                "FROM generate_series(1, :n) AS g"), {"day": day[-8:], "at": at, "n": PER_DAY})
        conn.execute(sa.text(f"ANALYZE {a.name}"))
    child = f"{days[1][-8:]}{PER_DAY:08d}"
    stmt = dependent_reads.parents_statement(models).bindparams(job_id=child, offset=0, limit=None)
    used, scanned = reads(plan_of(engine, stmt))
    assert used >= {f"{day}_pkey" for day in days} and not scanned & set(days)
    with engine.connect() as conn:
        rows = dependent_reads.parents(models, conn, dependent_reads.ParentsParams(job_id=child))
    assert [(r.id, r.status, r.result) for r in rows] == [(f"{days[1][-8:]}{PER_DAY - 1:08d}", "completed",
                                                           PER_DAY - 1)]


def test_the_dependents_read_probes_each_dependent_by_primary_key(engine: sa.Engine, models: Any) -> None:
    first = datetime.now(timezone.utc).date() - timedelta(days=2)
    days = attach_days(engine, models, first, 2)
    a = models.archive_table
    with engine.begin() as conn:
        for n, day in enumerate(days):  # each archived job keeps the one after it as its dependent
            at = noon(first + timedelta(days=n))
            conn.execute(sa.text(
                f"INSERT INTO {a.name} (id, kind, status, created_at, finished_at, moved_at, job, journal) "
                "SELECT :day || lpad(g::text, 8, '0'), 'k', 'completed', :at, :at, :at, "
                "jsonb_build_object('dependents', jsonb_build_array(jsonb_build_object('job_id', "
                ":day || lpad((g + 1)::text, 8, '0'), 'policy', 'cancel'))), '[]'::jsonb "
                "FROM generate_series(1, :n) AS g"), {"day": day[-8:], "at": at, "n": PER_DAY})
        conn.execute(sa.text(f"ANALYZE {a.name}"))
    parent = f"{days[1][-8:]}{1:08d}"
    stmt = dependent_reads.dependents_statement(models).bindparams(job_id=parent, after_at=None, after_id=None,
                                                                   limit=None)
    used, scanned = reads(plan_of(engine, stmt))
    assert used >= {f"{day}_pkey" for day in days} and not scanned & set(days)
    with engine.connect() as conn:
        rows = dependent_reads.dependents(models, conn, dependent_reads.DependentsParams(job_id=parent))
        counts = dependent_reads.dependent_counts(models, conn, parent)
    assert [(r.id, r.status, r.policy) for r in rows] == [(f"{days[1][-8:]}{2:08d}", "completed", "cancel")]
    assert counts == {"completed": 1}
