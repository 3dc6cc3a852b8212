-- venturi V3: reshaped claim, dedup and journal indexes; terminal-row cleanup
-- index; the unused journal-by-kind index dropped.

-- Claim: visible_at becomes a trailing key column, filtered in-index.
DROP INDEX {{prefix}}_jobs_claim;
CREATE INDEX {{prefix}}_jobs_claim
    ON {{prefix}}_jobs (kind, priority, created_at, visible_at)
    WHERE status = 'pending';
DROP INDEX {{prefix}}_jobs_claim_priority;
CREATE INDEX {{prefix}}_jobs_claim_priority
    ON {{prefix}}_jobs (priority, created_at, visible_at)
    WHERE status = 'pending';
-- Dedup: trailing created_at returns the oldest pending sibling without a sort.
DROP INDEX {{prefix}}_jobs_dedup;
CREATE INDEX {{prefix}}_jobs_dedup
    ON {{prefix}}_jobs (kind, dedup_key, created_at)
    WHERE dedup_key IS NOT NULL AND status = 'pending';
-- Status-less terminal-job cleanup: partial on terminal rows.
CREATE INDEX {{prefix}}_jobs_finished
    ON {{prefix}}_jobs (finished_at)
    WHERE finished_at IS NOT NULL;
-- Journal timeline: trailing id returns a job's entries in order.
DROP INDEX {{prefix}}_journal_job;
CREATE INDEX {{prefix}}_journal_job
    ON {{prefix}}_journal (job_id, id);
-- No code path queries the journal by kind over time.
DROP INDEX {{prefix}}_journal_kind;
