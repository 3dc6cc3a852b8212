"""Which queues a database holds: prefixes with both a ``<prefix>_jobs`` and a ``<prefix>_journal`` table."""

from __future__ import annotations

import sqlalchemy as sa

from venturi_sa.storage.params import Runner

_JOBS = sa.table("pg_class", sa.column("relname"), sa.column("relkind"), sa.column("oid"))


def queue_prefixes(runner: Runner) -> list[str]:
    """The prefixes of the queues visible on the search path, sorted (read-only)."""
    jobs, journal = _JOBS.alias("jobs"), _JOBS.alias("journal")
    prefix = sa.func.left(jobs.c.relname, sa.func.length(jobs.c.relname) - 5)
    stmt = (
        sa.select(prefix)
        .where(jobs.c.relname.like("%\\_jobs"), jobs.c.relkind == "r",
               sa.func.pg_table_is_visible(jobs.c.oid),
               sa.exists().where(journal.c.relname == prefix + "_journal", journal.c.relkind == "r",
                                 sa.func.pg_table_is_visible(journal.c.oid)))
        .order_by(prefix)
    )
    return [str(p) for p in runner.execute(stmt).scalars()]
