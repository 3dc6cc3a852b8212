-- venturi V2: history keyset pagination on (created_at DESC, id DESC).

CREATE INDEX {{prefix}}_jobs_created
    ON {{prefix}}_jobs (created_at, id);
