-- venturi V13: durable steps, sleeps and waits inside a job, and the signals
-- sent to jobs.  Two new tables; the seed tables are unchanged.

-- One row per recorded entry of a job's handler, keyed by its name (unique
-- within the job): a step (entry 'step', result = what its function returned,
-- JSON null included), a durable sleep (entry 'sleep', wake_at = the wake time
-- taken on the database clock when the sleep was first reached) or a wait for
-- a signal (entry 'wait', wake_at = its deadline or NULL for none; resolution
-- 'signal' with the signal's payload in result, or 'timeout'; NULL while the
-- wait is open).  run_no is the run that first reached it.  Rows go with their
-- job (ON DELETE CASCADE).
CREATE TABLE {{prefix}}_steps (
    job_id       text NOT NULL,
    name         text NOT NULL,
    entry        text NOT NULL,
    result       jsonb,
    run_no       integer NOT NULL,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    wake_at      timestamptz,
    resolution   text,
    CONSTRAINT {{prefix}}_steps_pkey PRIMARY KEY (job_id, name),
    CONSTRAINT {{prefix}}_steps_job_id_fkey FOREIGN KEY (job_id)
        REFERENCES {{prefix}}_jobs (id) ON DELETE CASCADE,
    CONSTRAINT {{prefix}}_steps_entry_check CHECK (entry IN ('step', 'sleep', 'wait')),
    CONSTRAINT {{prefix}}_steps_resolution_check CHECK (resolution IN ('signal', 'timeout'))
);

-- One row per signal sent to a job (queue.signal), first one of a name wins:
-- a wait_for of that name returns its payload.
CREATE TABLE {{prefix}}_signals (
    job_id   text NOT NULL,
    name     text NOT NULL,
    payload  jsonb,
    sent_at  timestamptz NOT NULL,
    CONSTRAINT {{prefix}}_signals_pkey PRIMARY KEY (job_id, name),
    CONSTRAINT {{prefix}}_signals_job_id_fkey FOREIGN KEY (job_id)
        REFERENCES {{prefix}}_jobs (id) ON DELETE CASCADE
);
