-- venturi V5: runtime control.  Two new tables; the seed tables are unchanged.

-- Pauses of a kind ('*' = every kind of the queue), one row per pause action.
-- A pause is in force while resumed_at is NULL and resume_at (the optional
-- automatic end) has not passed; at most one open row per kind.
CREATE TABLE {{prefix}}_pauses (
    id          bigint GENERATED ALWAYS AS IDENTITY,
    kind        text NOT NULL,
    reason      text,
    actor       text NOT NULL,
    paused_at   timestamptz NOT NULL,
    resume_at   timestamptz,
    resumed_at  timestamptz,
    resumed_by  text,
    CONSTRAINT {{prefix}}_pauses_pkey PRIMARY KEY (id)
);
CREATE UNIQUE INDEX {{prefix}}_pauses_open
    ON {{prefix}}_pauses (kind)
    WHERE resumed_at IS NULL;

-- Durable cancel requests for claimed jobs, read by the holder's lease renewal.
CREATE TABLE {{prefix}}_cancels (
    job_id      text NOT NULL,
    run_no      integer NOT NULL,
    actor       text NOT NULL,
    note        text,
    created_at  timestamptz NOT NULL,
    CONSTRAINT {{prefix}}_cancels_pkey PRIMARY KEY (job_id),
    CONSTRAINT {{prefix}}_cancels_job_id_fkey FOREIGN KEY (job_id)
        REFERENCES {{prefix}}_jobs (id) ON DELETE CASCADE
);
