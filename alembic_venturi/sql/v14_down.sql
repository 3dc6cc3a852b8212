-- venturi V14 reversed: archived jobs lose their kept steps and signals (a
-- dead job requeued from the archive then runs its steps from the top).

ALTER TABLE {{prefix}}_archive
    DROP COLUMN signals,
    DROP COLUMN steps;
