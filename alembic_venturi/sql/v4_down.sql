-- venturi V4 reversed: the periodic-job tables go; the seed tables are untouched.

DROP TABLE {{prefix}}_fires;
DROP TABLE {{prefix}}_schedules;
