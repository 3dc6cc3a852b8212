-- venturi V14 reversed: archived jobs lose their kept steps, signals and limit
-- keys (a dead job requeued from the archive then runs its steps from the top,
-- without a limit key).

ALTER TABLE {{prefix}}_archive
    DROP COLUMN limit_key,
    DROP COLUMN signals,
    DROP COLUMN steps;
