-- venturi V10 reversed: the limit tables dropped (keys, overrides and their
-- history, the rate log and the fairness state are gone).

DROP TABLE {{prefix}}_limit_turns;
DROP TABLE {{prefix}}_limit_starts;
DROP TABLE {{prefix}}_limit_log;
DROP TABLE {{prefix}}_limits;
DROP TABLE {{prefix}}_limit_keys;
