-- venturi V12: jobs that wait for other jobs.  Two new tables; the seed tables are unchanged.

-- A job enqueued with after=[...] is pending with visible_at 'infinity' while
-- any of its parents is not terminal.  One row per such job: how many of its
-- parents have not ended yet (decremented, under this row's lock, by the
-- transaction that records a parent's terminal outcome), and the time it was
-- asked to run at (run_at, or enqueue time + delay): on release its
-- visible_at becomes greatest(now, not_before); killed_by names the parent
-- whose death ended it dead (if_parent_dead='cancel').  Goes with its job.
CREATE TABLE {{prefix}}_waits (
    job_id      text NOT NULL,
    remaining   integer NOT NULL,
    not_before  timestamptz NOT NULL,
    killed_by   text,
    CONSTRAINT {{prefix}}_waits_pkey PRIMARY KEY (job_id),
    CONSTRAINT {{prefix}}_waits_job_id_fkey FOREIGN KEY (job_id)
        REFERENCES {{prefix}}_jobs (id) ON DELETE CASCADE
);

-- One row per dependency: the dependent job_id waits for parent_id (its
-- position in the after= list), with the policy applied if that parent ends
-- dead; done once the parent's terminal outcome was counted.  No foreign key
-- on parent_id: a finished parent may move to the archive and still be named.
CREATE TABLE {{prefix}}_parents (
    job_id     text NOT NULL,
    position   integer NOT NULL,
    parent_id  text NOT NULL,
    policy     text NOT NULL,
    done       boolean NOT NULL DEFAULT false,
    CONSTRAINT {{prefix}}_parents_pkey PRIMARY KEY (job_id, position),
    CONSTRAINT {{prefix}}_parents_policy_check CHECK (policy IN ('cancel', 'run')),
    CONSTRAINT {{prefix}}_parents_job_id_fkey FOREIGN KEY (job_id)
        REFERENCES {{prefix}}_jobs (id) ON DELETE CASCADE
);
CREATE INDEX {{prefix}}_parents_parent
    ON {{prefix}}_parents (parent_id);
