"""Millions of archived jobs in minutes: a first batch moved by venturi's own archive, the rest copied from it.

    seed_archived(url, "bench", 10_000_000)   # 200,000 seeded and moved, then 49 copies of them

Moving N jobs through ``queue.archive`` runs at 5,000-12,000 jobs/s on a
2-core machine (docs/performance.md), so 10M would take 15-30 minutes per
database.  Here ``move`` jobs (``completed``, one journal row each) are
inserted into ``<prefix>_jobs`` and moved by ``queue.archive``, so the
archive rows are exactly what the move writes; then the archive is filled to
``n`` rows by copies of those rows made in SQL, each with a new id (in the
row's ``id`` column and in its ``job`` document; the journal entries inside
keep the original's ids, the same size), in the same day partition.  What a
claim, a drain or a size measures does not depend on which way a row got
there.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

SEED = """
INSERT INTO {prefix}_jobs (id, kind, payload, priority, status, created_at, visible_at, finished_at, run_count)
SELECT 'T' || lpad(g::text, 25, '0'), 'noop', jsonb_build_object('seq', g), 1, 'completed',
       now() - interval '3 hours' + g * interval '1 microsecond', now() - interval '3 hours',
       now() - interval '2 hours' + g * interval '1 microsecond', 1
  FROM generate_series(:first, :last) AS g;
INSERT INTO {prefix}_journal (job_id, kind, run_no, recorded_at, outcome, attachment)
SELECT 'T' || lpad(g::text, 25, '0'), 'noop', 1, now() - interval '2 hours' + g * interval '1 microsecond',
       'completed', 'null'::jsonb
  FROM generate_series(:first, :last) AS g;
"""
# Copies number :first..:last of every moved row: 'C' + the copy's number in 4 digits + the original's last
# 21 characters (ids stay 26 long).
COPY = """
INSERT INTO {prefix}_archive
SELECT new.id, a.kind, a.status, a.created_at - k * interval '1 millisecond', a.finished_at, a.moved_at,
       jsonb_set(a.job, '{{id}}', to_jsonb(new.id)), a.journal, a.timeout, a.trace, a.steps, a.signals, a.limit_key
  FROM {prefix}_archive AS a, generate_series(:first, :last) AS k,
       LATERAL (SELECT 'C' || lpad(CAST(k AS text), 4, '0') || right(a.id, 21) AS id) AS new
 WHERE a.id LIKE 'T%' {limit}
"""
ROWS_PER_COPY_STATEMENT = 1_000_000


def seed_completed(engine: sa.Engine, prefix: str, first: int, last: int) -> None:
    """Insert jobs ``first``..``last`` as ``completed`` (payload ``{"seq": g}``) with one journal row each."""
    with engine.begin() as conn:
        for statement in SEED.format(prefix=prefix).split(";"):
            if statement.strip():
                conn.execute(sa.text(statement), {"first": first, "last": last})


def seed_archived(url: str, prefix: str, n: int, *, move: int = 200_000, log: Any = print) -> dict[str, Any]:
    """Fill ``prefix``'s archive with ``n`` jobs: ``min(n, move)`` moved by ``queue.archive``, the rest copied.

    Returns what was done (jobs moved, jobs copied, seconds of each part).
    The database must be at venturi's head for ``prefix`` with no jobs yet.
    """
    import time

    from venturi_sa import Queue, make_models

    queue = Queue(make_models(prefix))
    engine = sa.create_engine(url)
    try:
        moved_n = min(n, move)
        t0 = time.monotonic()
        for first in range(1, moved_n + 1, 500_000):
            seed_completed(engine, prefix, first, min(moved_n, first + 499_999))
        t1 = time.monotonic()
        moved = queue.archive(engine, batch_size=5000)
        if moved != moved_n:
            raise RuntimeError(f"the archive moved {moved} of {moved_n} seeded jobs")
        t2 = time.monotonic()
        log(f"seeded {moved_n:,} jobs in {t1 - t0:.0f} s, moved them in {t2 - t1:.0f} s")
        copied, k = 0, 1
        per_statement = max(1, ROWS_PER_COPY_STATEMENT // moved_n)
        with engine.connect() as conn:
            while moved_n + copied < n:
                take = min(moved_n * per_statement, n - moved_n - copied)
                last = k + (take - 1) // moved_n
                limit = "" if take == moved_n * (last - k + 1) else f"LIMIT {int(take)}"
                conn.execute(sa.text(COPY.format(prefix=prefix, limit=limit)), {"first": k, "last": last})
                conn.commit()
                copied, k = copied + take, last + 1
        t3 = time.monotonic()
        if copied:
            log(f"copied {copied:,} archived jobs in {t3 - t2:.0f} s")
        return {"moved": moved_n, "copied": copied, "seed_s": t1 - t0, "move_s": t2 - t1, "copy_s": t3 - t2}
    finally:
        engine.dispose()
