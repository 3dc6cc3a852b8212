-- venturi V5 reversed: the runtime-control tables dropped (the seed tables untouched).

DROP TABLE {{prefix}}_cancels;
DROP TABLE {{prefix}}_pauses;
