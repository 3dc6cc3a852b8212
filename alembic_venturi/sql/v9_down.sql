-- venturi V9 reversed: the archive dropped with every partition (its jobs are
-- gone: move them back first if they matter), the jobs table's storage
-- parameters reset to PostgreSQL's defaults.

DROP TABLE {{prefix}}_archive;
ALTER TABLE {{prefix}}_jobs RESET (
    fillfactor,
    autovacuum_vacuum_scale_factor,
    autovacuum_analyze_scale_factor
);
