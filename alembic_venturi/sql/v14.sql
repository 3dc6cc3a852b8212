-- venturi V14: an archived job keeps its durable steps, its signals and its
-- limit key.
--
-- Until V14 the archive's move took a job's {{prefix}}_steps,
-- {{prefix}}_signals and {{prefix}}_limit_keys rows by their ON DELETE
-- CASCADE without keeping them, so a dead job put back by a requeue ran its
-- recorded steps again (a card charged twice) and outside its key's limits,
-- and its archived history showed no steps.  Each archive row now holds the
-- steps and signals as JSON arrays (each element the row without job_id;
-- NULL: the job had none) and the limit key (NULL: none), and the move back
-- restores them.  Adding nullable columns without a default to the
-- partitioned parent (and so to every day) rewrites nothing; the seed tables
-- are unchanged.
ALTER TABLE {{prefix}}_archive
    ADD COLUMN steps jsonb,
    ADD COLUMN signals jsonb,
    ADD COLUMN limit_key text;
