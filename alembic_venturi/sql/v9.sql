-- venturi V9: the archive of terminal jobs, and storage parameters of the jobs
-- table.  One new table; the seed tables' columns, constraints and indexes are
-- unchanged.

-- Terminal jobs moved out of {{prefix}}_jobs by the archiver, one row per job:
-- the job's row as it was (job), its journal in id order (journal), its own
-- time limit and its trace context (the rows of _timeouts and _traces, which
-- went with the job).  Range-partitioned by moved_at (the time of the move,
-- so only the newest partition takes inserts); the archiver attaches one
-- partition per UTC day ahead of time, named {{prefix}}_archive_YYYYMMDD.
-- There is no DEFAULT partition: a row with no partition fails its whole move
-- (nothing moves), it is never parked where dropping old days cannot reach it.
-- Retention drops whole partitions.
CREATE TABLE {{prefix}}_archive (
    id           text NOT NULL,
    kind         text NOT NULL,
    status       text NOT NULL,
    created_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    moved_at     timestamptz NOT NULL,
    job          jsonb NOT NULL,
    journal      jsonb NOT NULL,
    timeout      interval,
    trace        jsonb,
    CONSTRAINT {{prefix}}_archive_pkey PRIMARY KEY (id, moved_at),
    CONSTRAINT {{prefix}}_archive_status_check CHECK (status IN ('completed', 'dead'))
) PARTITION BY RANGE (moved_at);
-- History keyset paging across the live table and the archive.
CREATE INDEX {{prefix}}_archive_created
    ON {{prefix}}_archive (created_at, id);
-- Filtered history and cleanup, stats per status and kind.
CREATE INDEX {{prefix}}_archive_history
    ON {{prefix}}_archive (status, kind, finished_at);
-- Cleanup of the partition that straddles the cutoff.
CREATE INDEX {{prefix}}_archive_finished
    ON {{prefix}}_archive (finished_at);

-- The jobs table changes rows in place (claim, renewal, outcome): leave room on
-- each page so a new row version can stay on its page, and vacuum it after 2 %
-- of its rows changed instead of PostgreSQL's default 20 % (a queue table is
-- small and churns).  Only future pages get the fill factor.
ALTER TABLE {{prefix}}_jobs SET (
    fillfactor = 90,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02
);
