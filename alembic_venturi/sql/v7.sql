-- venturi V7: owed on_dead calls.  One new table; the seed tables are unchanged.

-- A job went dead where its task's code was not loaded (a lease recovery, a
-- cancel found pending at a retry or release, an operator action without the
-- task's registry): the task's on_dead hook is owed.  A worker running that
-- kind deletes the row and calls the hook in one transaction, so the hook runs
-- exactly once; a hook that raises leaves the row, retried after not_before.
-- Goes with its job (ON DELETE CASCADE).
CREATE TABLE {{prefix}}_on_dead (
    id          bigint GENERATED ALWAYS AS IDENTITY,
    job_id      text NOT NULL,
    kind        text NOT NULL,
    run_no      integer NOT NULL,
    note        text,
    actor       text NOT NULL,
    created_at  timestamptz NOT NULL,
    attempts    integer NOT NULL DEFAULT 0,
    not_before  timestamptz NOT NULL,
    last_error  text,
    CONSTRAINT {{prefix}}_on_dead_pkey PRIMARY KEY (id),
    CONSTRAINT {{prefix}}_on_dead_job_id_fkey FOREIGN KEY (job_id)
        REFERENCES {{prefix}}_jobs (id) ON DELETE CASCADE
);
CREATE INDEX {{prefix}}_on_dead_job
    ON {{prefix}}_on_dead (job_id);
