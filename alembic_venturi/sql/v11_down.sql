-- venturi V11 reversed: the throttle starts dropped (the seed tables untouched).

DROP TABLE {{prefix}}_throttles;
