-- venturi V1 reversed: drop the queue's tables (their indexes go with them).
-- Every job and journal row of the queue is lost.

DROP TABLE {{prefix}}_journal;
DROP TABLE {{prefix}}_jobs;
