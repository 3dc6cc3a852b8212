-- venturi V3 reversed: back to the V2 index shapes.

CREATE INDEX {{prefix}}_journal_kind
    ON {{prefix}}_journal (kind, recorded_at);
DROP INDEX {{prefix}}_journal_job;
CREATE INDEX {{prefix}}_journal_job
    ON {{prefix}}_journal (job_id);
DROP INDEX {{prefix}}_jobs_finished;
DROP INDEX {{prefix}}_jobs_dedup;
CREATE INDEX {{prefix}}_jobs_dedup
    ON {{prefix}}_jobs (kind, dedup_key)
    WHERE dedup_key IS NOT NULL AND status = 'pending';
DROP INDEX {{prefix}}_jobs_claim_priority;
CREATE INDEX {{prefix}}_jobs_claim_priority
    ON {{prefix}}_jobs (priority, created_at)
    WHERE status = 'pending';
DROP INDEX {{prefix}}_jobs_claim;
CREATE INDEX {{prefix}}_jobs_claim
    ON {{prefix}}_jobs (kind, priority, created_at)
    WHERE status = 'pending';
