-- venturi V10: global, per-key and rate limits, changeable at runtime.  New
-- tables only; the seed tables are unchanged.

-- A job's limit key (its task's limit_key(), when not None), written with the
-- job and rewritten when its payload changes.  A job with no row has the key
-- None.  Goes with its job (ON DELETE CASCADE).
CREATE TABLE {{prefix}}_limit_keys (
    job_id  text NOT NULL,
    kind    text NOT NULL,
    key     text NOT NULL,
    CONSTRAINT {{prefix}}_limit_keys_pkey PRIMARY KEY (job_id),
    CONSTRAINT {{prefix}}_limit_keys_job_id_fkey FOREIGN KEY (job_id)
        REFERENCES {{prefix}}_jobs (id) ON DELETE CASCADE
);

-- Runtime overrides of a kind's limits (queue.set_limit): one row per kind
-- and limit name.  value NULL means "no limit" (overriding a declared one);
-- per is the window of a rate.  queue.clear_limit deletes rows.
CREATE TABLE {{prefix}}_limits (
    kind    text NOT NULL,
    name    text NOT NULL,
    value   integer,
    per     interval,
    actor   text NOT NULL,
    set_at  timestamptz NOT NULL,
    CONSTRAINT {{prefix}}_limits_pkey PRIMARY KEY (kind, name),
    CONSTRAINT {{prefix}}_limits_name_check
        CHECK (name IN ('global_concurrency', 'key_concurrency', 'rate_limit', 'key_rate_limit')),
    CONSTRAINT {{prefix}}_limits_value_check CHECK (value > 0)
);

-- Who changed which override, and when (set or clear).  Never a journal row.
CREATE TABLE {{prefix}}_limit_log (
    id      bigint GENERATED ALWAYS AS IDENTITY,
    kind    text NOT NULL,
    name    text NOT NULL,
    action  text NOT NULL,
    value   integer,
    per     interval,
    actor   text NOT NULL,
    at      timestamptz NOT NULL,
    CONSTRAINT {{prefix}}_limit_log_pkey PRIMARY KEY (id),
    CONSTRAINT {{prefix}}_limit_log_action_check CHECK (action IN ('set', 'clear'))
);

-- The rate limits' sliding log: one row per start (claim) of a rate-limited
-- kind; key is the job's limit key ('' for the key None).  Rows older than
-- the longest window are pruned by the claim.
CREATE TABLE {{prefix}}_limit_starts (
    id          bigint GENERATED ALWAYS AS IDENTITY,
    kind        text NOT NULL,
    key         text NOT NULL,
    at          timestamptz NOT NULL,
    CONSTRAINT {{prefix}}_limit_starts_pkey PRIMARY KEY (id)
);
CREATE INDEX {{prefix}}_limit_starts_kind
    ON {{prefix}}_limit_starts (kind, at);
CREATE INDEX {{prefix}}_limit_starts_key
    ON {{prefix}}_limit_starts (kind, key, at);

-- Fair claims: when each key ('' for None) of a kind was last claimed.
CREATE TABLE {{prefix}}_limit_turns (
    kind        text NOT NULL,
    key         text NOT NULL,
    at          timestamptz NOT NULL,
    CONSTRAINT {{prefix}}_limit_turns_pkey PRIMARY KEY (kind, key)
);
