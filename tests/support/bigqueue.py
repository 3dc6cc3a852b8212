"""A big queue for query plans: terminal jobs with a journal entry each, live rows, schedules, fires, pauses.

Used by ``tests/integration/web/test_web_explain.py`` (50k rows by default) and by
``bench/webplans.py`` (1M rows, EXPLAIN ANALYZE of every page), so both plan
the same data.  Plain SQL, one transaction, then ``VACUUM ANALYZE``.
"""

from __future__ import annotations

import time
from datetime import datetime

import sqlalchemy as sa

from venturi_sa import Models, make_models

SEED = """
INSERT INTO {jobs} (id, kind, payload, priority, status, created_at, visible_at, finished_at,
                    run_count, failure_count)
SELECT lpad(i::text, 26, '0'), 'kind_' || (i % 12), jsonb_build_object('order', i), i % 3,
       CASE WHEN i % 10 = 0 THEN 'dead' ELSE 'completed' END,
       t0 + make_interval(secs => i * {step}), t0 + make_interval(secs => i * {step}),
       t0 + make_interval(secs => i * {step} + 2), 1, CASE WHEN i % 10 = 0 THEN 5 ELSE 0 END
FROM generate_series(1, {n}) AS i, (SELECT now() - interval '10 days' AS t0) AS base;

INSERT INTO {journal} (job_id, kind, run_no, recorded_at, outcome, note)
SELECT id, kind, 1, finished_at, status, 'run of ' || id FROM {jobs} ORDER BY finished_at;

INSERT INTO {jobs} (id, kind, payload, status, created_at, visible_at, claimed_by, claim_expires_at,
                    run_count)
SELECT 'L' || lpad(i::text, 25, '0'), 'kind_' || (i % 12), '{{}}'::jsonb,
       CASE WHEN i % 5 = 0 THEN 'claimed' ELSE 'pending' END,
       now() - make_interval(secs => i), now() + make_interval(secs => i % 7 * 60 - 180),
       CASE WHEN i % 5 = 0 THEN 'host:' || (i % 3) END,
       CASE WHEN i % 5 = 0 THEN now() + make_interval(secs => i % 3 * 60 - 60) END,
       CASE WHEN i % 5 = 0 THEN 1 ELSE 0 END
FROM generate_series(1, 500) AS i;

INSERT INTO {schedules} (name, kind, payload, priority, timing, tz, catch_up, overlap, next_at, updated)
SELECT 'every-' || i || 'h', 'kind_' || i, '{{}}'::jsonb, 1, 'every:' || i * 3600, 'UTC', 'latest',
       'allow', now() + make_interval(hours => i), now()
FROM generate_series(1, 3) AS i;

INSERT INTO {fires} (schedule, fire_at, job_id, fired_at)
SELECT 'every-' || (i / 100 % 3 + 1) || 'h', t0 + make_interval(secs => i * {step}), lpad(i::text, 26, '0'),
       t0 + make_interval(secs => i * {step})
FROM generate_series(100, {n}, 100) AS i, (SELECT now() - interval '10 days' AS t0) AS base;

INSERT INTO {pauses} (kind, reason, actor, paused_at)
VALUES ('kind_5', 'seeded', 'bigqueue_kit', now()), ('kind_7', 'seeded', 'bigqueue_kit', now());
"""
"""Terminal job ``i`` (1..n) has id ``lpad(i, 26, '0')``, is dead when ``i % 10 = 0``, and every
100th was fired by a schedule; live ids start with ``L``."""


def seed_big(engine: sa.Engine, stem: str, rows: int) -> tuple[Models, datetime]:
    """A fresh migrated queue ``<stem>_<n>`` holding the :data:`SEED` rows; returns it and the database now."""
    import alembic_venturi

    prefix = f"{stem}_{int(time.time() * 1000) % 10**9}"
    alembic_venturi.upgrade(engine, prefix)
    models = make_models(prefix)
    names = {t: getattr(models, f"{t}_table").name for t in ("jobs", "journal", "schedules", "fires", "pauses")}
    with engine.begin() as conn:
        conn.execute(sa.text(SEED.format(n=rows, step=10 * 86400 / rows, **names)))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for name in names.values():
            conn.exec_driver_sql(f"VACUUM ANALYZE {name}")
        now = conn.execute(sa.select(sa.func.now())).scalar_one()
    return models, now
