-- venturi V2 reversed.

DROP INDEX {{prefix}}_jobs_created;
