-- venturi V12 reversed: the dependency tables dropped (the seed tables untouched).

DROP TABLE {{prefix}}_parents;
DROP TABLE {{prefix}}_waits;
