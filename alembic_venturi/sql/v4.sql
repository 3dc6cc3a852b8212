-- stand-in: the periodic branch's v4 replaces this at merge
SELECT 1;
