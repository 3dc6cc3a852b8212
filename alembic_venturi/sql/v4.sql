-- venturi V4: periodic jobs.  One row per declared schedule, its next fire time
-- advanced by compare-and-set in the transaction that inserts the fired job, and
-- one row per fired (schedule, fire time): the unique key that makes a second
-- insert for the same fire time impossible.  The seed tables are not touched.

CREATE TABLE {{prefix}}_schedules (
    name text NOT NULL,
    kind text NOT NULL,
    payload jsonb NOT NULL,
    priority smallint NOT NULL,
    timing text NOT NULL,
    tz text NOT NULL,
    catch_up text NOT NULL,
    overlap text NOT NULL,
    next_at timestamptz NOT NULL,
    last_at timestamptz,
    last_job text,
    paused boolean DEFAULT false NOT NULL,
    removed_at timestamptz,
    fired bigint DEFAULT 0 NOT NULL,
    skipped bigint DEFAULT 0 NOT NULL,
    updated timestamptz NOT NULL,
    CONSTRAINT {{prefix}}_schedules_pkey PRIMARY KEY (name),
    CONSTRAINT {{prefix}}_schedules_priority_check CHECK (priority IN (0, 1, 2)),
    CONSTRAINT {{prefix}}_schedules_overlap_check CHECK (overlap IN ('allow', 'skip', 'queue'))
);
-- The firing scan: due, live schedules by next fire time.
CREATE INDEX {{prefix}}_schedules_due
    ON {{prefix}}_schedules (next_at)
    WHERE NOT paused AND removed_at IS NULL;

CREATE TABLE {{prefix}}_fires (
    schedule text NOT NULL,
    fire_at timestamptz NOT NULL,
    job_id text NOT NULL,
    fired_at timestamptz NOT NULL,
    CONSTRAINT {{prefix}}_fires_pkey PRIMARY KEY (schedule, fire_at),
    CONSTRAINT {{prefix}}_fires_schedule_fkey FOREIGN KEY (schedule)
        REFERENCES {{prefix}}_schedules (name) ON DELETE CASCADE
);
-- Which schedule fired a job.  No foreign key to the jobs table: that would put
-- referential-integrity triggers on the seed table, on the claim path's rows.
CREATE INDEX {{prefix}}_fires_job
    ON {{prefix}}_fires (job_id);
