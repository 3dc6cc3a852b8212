-- venturi V14: an archived job keeps its durable steps and its signals.
--
-- Until V14 the archive's move took a job's {{prefix}}_steps and
-- {{prefix}}_signals rows by their ON DELETE CASCADE without keeping them,
-- so a dead job put back by a requeue ran its recorded steps again (a card
-- charged twice) and its archived history showed none.  Each archive row now
-- holds them as JSON arrays (each element the row without job_id; NULL: the
-- job had none), and the move back restores them.  Adding nullable columns
-- without a default to the partitioned parent (and so to every day) rewrites
-- nothing; the seed tables are unchanged.
ALTER TABLE {{prefix}}_archive
    ADD COLUMN steps jsonb,
    ADD COLUMN signals jsonb;
