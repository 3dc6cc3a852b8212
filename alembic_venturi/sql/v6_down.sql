-- venturi V6 reversed: the per-job time limits dropped (the seed tables untouched).

DROP TABLE {{prefix}}_timeouts;
