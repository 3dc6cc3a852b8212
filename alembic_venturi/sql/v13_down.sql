-- venturi V13 reversed: recorded steps, sleeps, waits and signals are dropped
-- (a job that used them runs its steps again from the top).

DROP TABLE {{prefix}}_signals;
DROP TABLE {{prefix}}_steps;
