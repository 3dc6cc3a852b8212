-- venturi V6: per-job time limits.  One new table; the seed tables are unchanged.

-- A job's own time limit (an enqueue's timeout=), overriding its task's
-- Task.timeout.  Read by the claim (a primary-key lookup per claimed job);
-- goes with its job (ON DELETE CASCADE).
CREATE TABLE {{prefix}}_timeouts (
    job_id   text NOT NULL,
    timeout  interval NOT NULL,
    CONSTRAINT {{prefix}}_timeouts_pkey PRIMARY KEY (job_id),
    CONSTRAINT {{prefix}}_timeouts_timeout_check CHECK (timeout > interval '0'),
    CONSTRAINT {{prefix}}_timeouts_job_id_fkey FOREIGN KEY (job_id)
        REFERENCES {{prefix}}_jobs (id) ON DELETE CASCADE
);
