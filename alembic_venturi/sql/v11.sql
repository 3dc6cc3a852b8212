-- venturi V11: throttle starts.  One new table; the seed tables are unchanged.

-- The last start of each throttled (kind, dedup key): Task.throttle allows one
-- start per window per key.  A worker's claim of a throttled kind upserts the
-- row in the claim's transaction (and sends back a claim whose key started less
-- than a window ago); an enqueue of a throttled kind reads it to schedule the
-- new job at began_at + window.  No foreign key: a start outlives its job's
-- cleanup and archiving.
CREATE TABLE {{prefix}}_throttles (
    kind       text NOT NULL,
    key        text NOT NULL,  -- the jobs' dedup_key
    began_at   timestamptz NOT NULL,
    job_id     text NOT NULL,
    CONSTRAINT {{prefix}}_throttles_pkey PRIMARY KEY (kind, key)
);
