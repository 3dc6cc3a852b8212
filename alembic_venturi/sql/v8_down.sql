-- venturi V8 reversed: the trace contexts dropped (the seed tables untouched).

DROP TABLE {{prefix}}_traces;
