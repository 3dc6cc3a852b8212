"""EXPLAIN of the history, stats and cleanup queries on a table of >=100k terminal rows.

The statements explained are the ones the API runs (the storage builders), so a
change to a query that loses its seed index fails here.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from support.ops import assert_plan, count, indexes_used, node_types, plan_of

from venturi_sa import Models, make_models
from venturi_sa.storage import cleanup as cleanup_sql
from venturi_sa.storage import history as history_sql
from venturi_sa.storage import stats as stats_sql

TERMINAL_ROWS = 120_000
KINDS = 12

SEED = """
INSERT INTO {jobs} (id, kind, payload, priority, status, created_at, visible_at, finished_at,
                    run_count, failure_count)
SELECT lpad(i::text, 26, '0'), 'kind_' || (i % {kinds}), '{{}}'::jsonb, i % 3,
       CASE WHEN i % 10 = 0 THEN 'dead' ELSE 'completed' END,
       t0 + make_interval(secs => i * 20), t0 + make_interval(secs => i * 20),
       t0 + make_interval(secs => i * 20 + 5), 1, CASE WHEN i % 10 = 0 THEN 5 ELSE 0 END
FROM generate_series(1, {n}) AS i, (SELECT now() - interval '30 days' AS t0) AS base;

INSERT INTO {jobs} (id, kind, payload, status, created_at, visible_at, claimed_by, claim_expires_at,
                    run_count)
SELECT 'L' || lpad(i::text, 25, '0'), 'kind_' || (i % {kinds}), '{{}}'::jsonb,
       CASE WHEN i % 5 = 0 THEN 'claimed' ELSE 'pending' END,
       now() - make_interval(secs => i), now() + make_interval(secs => i % 7 * 60 - 180),
       CASE WHEN i % 5 = 0 THEN 'host:1' END,
       CASE WHEN i % 5 = 0 THEN now() + make_interval(secs => i % 3 * 60 - 60) END,
       CASE WHEN i % 5 = 0 THEN 1 ELSE 0 END
FROM generate_series(1, 500) AS i;

INSERT INTO {journal} (job_id, kind, run_no, recorded_at, outcome)
SELECT id, kind, 1, finished_at, status FROM {jobs} WHERE finished_at IS NOT NULL;
"""


@pytest.fixture(scope="module")
def big(engine: sa.Engine) -> tuple[Models, datetime]:
    """A queue with 120k terminal rows (and journal), 500 live rows, analyzed and vacuumed."""
    import alembic_venturi

    prefix = f"explain_{int(time.time() * 1000) % 10**9}"
    alembic_venturi.upgrade(engine, prefix)
    models = make_models(prefix)
    names = models.names
    with engine.begin() as conn:
        conn.execute(sa.text(SEED.format(jobs=names.jobs, journal=names.journal, kinds=KINDS,
                                         n=TERMINAL_ROWS)))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql(f"VACUUM ANALYZE {names.jobs}")
        conn.exec_driver_sql(f"VACUUM ANALYZE {names.journal}")
        now = conn.execute(sa.select(sa.func.now())).scalar_one()
    return models, now


SEED_INDEXES = ("jobs_claim", "jobs_claim_priority", "jobs_visible", "jobs_dedup", "jobs_lease",
                "jobs_history", "jobs_finished", "jobs_created", "journal_job", "jobs_pkey")


def _uses(engine: sa.Engine, statement: Any, models: Models, *expected: str) -> dict[str, Any]:
    """Assert the plan reads through one of ``expected`` and never scans the table."""
    return assert_plan(engine, statement, models, any_of=expected, allowed=(*SEED_INDEXES, "parents_parent"))


H = history_sql.HistoryParams
C = cleanup_sql.CleanupParams


def test_history_pages_walk_jobs_created_without_a_sort(engine, big):  # type: ignore[no-untyped-def]
    models, now = big
    first = _uses(engine, history_sql.history_statement(models, H()), models, "jobs_created")
    later = _uses(engine, history_sql.history_statement(
        models, H(after=(now - timedelta(days=10), "00000000000000000000050000"))), models, "jobs_created")
    assert "Sort" not in node_types(first) | node_types(later)
    _uses(engine, history_sql.history_statement(models, H(statuses=("dead",), kind="kind_3")), models,
          "jobs_created", "jobs_history")


def test_history_finished_window_uses_a_terminal_index(engine, big):  # type: ignore[no-untyped-def]
    models, now = big
    window = H(statuses=("dead",), kind="kind_3", finished_after=now - timedelta(days=20),
               finished_before=now - timedelta(days=19))
    _uses(engine, history_sql.history_statement(models, window), models, "jobs_history", "jobs_finished")
    _uses(engine, history_sql.history_statement(models, H(finished_after=now - timedelta(hours=6))), models,
          "jobs_finished", "jobs_history", "jobs_created")


def test_journal_timeline_reads_journal_job_in_order(engine, big):  # type: ignore[no-untyped-def]
    models, _ = big
    plan = _uses(engine, history_sql.journal_statement(models, "00000000000000000000050000"), models,
                 "journal_job")
    assert "Sort" not in node_types(plan)
    # The same index serves the ON DELETE CASCADE lookup cleanup triggers.
    entry = models.JournalEntry
    _uses(engine, sa.delete(entry).where(entry.job_id == "00000000000000000000050000"), models, "journal_job")


def test_stats_queries_use_history_pending_and_lease_indexes(engine, big):  # type: ignore[no-untyped-def]
    models, _ = big
    _uses(engine, stats_sql.counts_statement(models), models, "jobs_history")
    _uses(engine, stats_sql.pending_statement(models), models, "jobs_history", "jobs_visible", "jobs_claim",
          "jobs_claim_priority")
    _uses(engine, stats_sql.expired_statement(models), models, "jobs_lease")


@pytest.mark.parametrize(("statuses", "kind", "expected"), [
    ((), None, ("jobs_finished",)),
    (("dead",), None, ("jobs_history", "jobs_finished")),
    (("completed",), "kind_3", ("jobs_history", "jobs_finished")),
    (("dead",), "kind_3", ("jobs_history", "jobs_finished")),
])
def test_cleanup_batches_use_terminal_indexes(engine, big, statuses, kind, expected):  # type: ignore[no-untyped-def]
    """Each job deleted is probed for a dependent not yet ended (``_parents_parent``, v12)."""
    models, now = big
    params = C(cutoff=now - timedelta(days=7), statuses=statuses, kind=kind)
    plan = _uses(engine, cleanup_sql.delete_batch_statement(models, params), models, *expected)
    assert models.names.index("jobs_pkey") in indexes_used(plan)  # the delete itself: key lookups
    later = C(cutoff=now - timedelta(days=7), statuses=statuses, kind=kind, floor=now - timedelta(days=15))
    _uses(engine, cleanup_sql.delete_batch_statement(models, later), models, *expected)
    narrow = C(cutoff=now - timedelta(days=27), statuses=statuses, kind=kind)
    _uses(engine, cleanup_sql.count_statement(models, narrow), models, *expected)


def test_the_job_view_is_a_key_lookup_and_two_key_probes(engine, big):  # type: ignore[no-untyped-def]
    """``get_job`` reads the fire that inserted the job by ``_fires_job`` and its own time limit by
    ``_timeouts_pkey``, never scanning ``_fires`` or ``_timeouts``."""
    models, _ = big
    names = models.names
    with engine.begin() as conn:  # 20k of the jobs were fired by one schedule, one fire each; 30k have a limit
        conn.execute(sa.text(f"INSERT INTO {names.schedules} (name, kind, payload, priority, timing, tz, catch_up, "
                             "overlap, next_at, updated) VALUES ('s', 'kind_0', '{}', 1, 'every:60', 'UTC', "
                             "'latest', 'allow', now(), now())"))
        conn.execute(sa.text(f"INSERT INTO {names.fires} (schedule, fire_at, job_id, fired_at) "
                             f"SELECT 's', created_at, id, created_at FROM {names.jobs} "
                             "WHERE id < lpad('20000', 26, '0')"))
        conn.execute(sa.text(f"INSERT INTO {names.timeouts} (job_id, timeout) "
                             f"SELECT id, interval '1 minute' FROM {names.jobs} "
                             "WHERE id BETWEEN lpad('10000', 26, '0') AND lpad('40000', 26, '0')"))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql(f"VACUUM ANALYZE {names.fires}")
        conn.exec_driver_sql(f"VACUUM ANALYZE {names.timeouts}")
    expected = {names.index(i) for i in ("jobs_pkey", "fires_job", "timeouts_pkey")}
    # fired with a limit, limit only, neither
    for job_id in ("00000000000000000000010000", "00000000000000000000030000", "00000000000000000000050000"):
        plan = plan_of(engine, history_sql.job_view_statement(models, job_id))
        assert "Seq Scan" not in node_types(plan), sorted(node_types(plan))
        assert indexes_used(plan) == expected, indexes_used(plan)


def test_cleanup_on_the_big_table(engine, big):  # type: ignore[no-untyped-def]
    """Runs last: the API deletes exactly what the dry run counted, in batches, live rows kept."""
    from venturi_sa import Queue

    models, now = big
    queue = Queue(models)
    before = queue.stats(engine)
    assert before.completed + before.dead == TERMINAL_ROWS
    # One fixed cutoff: rows finish every 20 s, so an ``older_than`` read twice
    # a moment apart can count one more row the second time.
    cutoff = now - timedelta(days=20)
    planned = queue.cleanup(engine, before=cutoff, dry_run=True)
    batches: list[int] = []
    assert queue.cleanup(engine, before=cutoff, batch_size=5000, progress=batches.append) == planned
    assert planned > 5000 and len(batches) == -(-planned // 5000)
    after = queue.stats(engine)
    assert after.completed + after.dead == TERMINAL_ROWS - planned
    assert (after.pending, after.in_flight) == (before.pending, before.in_flight)
    assert count(engine, f"SELECT count(*) FROM {models.names.journal}") == TERMINAL_ROWS - planned
