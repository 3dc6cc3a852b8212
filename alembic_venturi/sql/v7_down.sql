-- venturi V7 reversed: the owed on_dead calls dropped (the seed tables untouched).

DROP TABLE {{prefix}}_on_dead;
