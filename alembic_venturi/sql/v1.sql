-- venturi V1: the queue's two tables and their original indexes.
-- alembic_venturi replaces the prefix token with the queue prefix.
-- Never edit this file once released: change the schema in a new version.

CREATE TABLE {{prefix}}_jobs (
    id text PRIMARY KEY,
    kind text NOT NULL,
    payload jsonb NOT NULL,
    priority smallint NOT NULL DEFAULT 1
        CHECK (priority IN (0, 1, 2)),
    status text NOT NULL
        CHECK (status IN ('pending', 'claimed', 'completed', 'dead')),
    created_at timestamptz NOT NULL,
    visible_at timestamptz NOT NULL,
    claim_expires_at timestamptz,
    claimed_by text,
    finished_at timestamptz,
    run_count integer NOT NULL DEFAULT 0,
    failure_count integer NOT NULL DEFAULT 0,
    carry jsonb NOT NULL DEFAULT 'null'::jsonb,
    dedup_key text
);

CREATE TABLE {{prefix}}_journal (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id text NOT NULL
        REFERENCES {{prefix}}_jobs (id) ON DELETE CASCADE,
    kind text NOT NULL,
    run_no integer NOT NULL,
    recorded_at timestamptz NOT NULL,
    outcome text NOT NULL
        CHECK (outcome IN ('completed', 'paused', 'retried',
                           'dead', 'stale-recovered',
                           'released', 'merged')),
    note text,
    attachment jsonb
);

-- Claim path: highest-priority oldest pending row, per kind and across kinds.
CREATE INDEX {{prefix}}_jobs_claim
    ON {{prefix}}_jobs (kind, priority, created_at)
    WHERE status = 'pending';
CREATE INDEX {{prefix}}_jobs_claim_priority
    ON {{prefix}}_jobs (priority, created_at)
    WHERE status = 'pending';
-- Soonest future eligibility, for the worker's wait timeout.
CREATE INDEX {{prefix}}_jobs_visible
    ON {{prefix}}_jobs (kind, visible_at)
    WHERE status = 'pending';
-- Deduplication candidacy lookup (non-unique).
CREATE INDEX {{prefix}}_jobs_dedup
    ON {{prefix}}_jobs (kind, dedup_key)
    WHERE dedup_key IS NOT NULL AND status = 'pending';
-- Stale-claim recovery: expired leases.
CREATE INDEX {{prefix}}_jobs_lease
    ON {{prefix}}_jobs (claim_expires_at)
    WHERE status = 'claimed';
-- History listing and status-filtered cleanup.
CREATE INDEX {{prefix}}_jobs_history
    ON {{prefix}}_jobs (status, kind, finished_at);
-- Journal per-job timeline and the foreign key's cascade.
CREATE INDEX {{prefix}}_journal_job
    ON {{prefix}}_journal (job_id);
-- Journal queries by kind over time (speculative; dropped in V3).
CREATE INDEX {{prefix}}_journal_kind
    ON {{prefix}}_journal (kind, recorded_at);
