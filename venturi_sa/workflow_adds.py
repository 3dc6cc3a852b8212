"""``queue.job(task, after=[...])``: a dependent added with ``session.add``, linked by the flush that inserts it.

:func:`defer` checks ``after=`` and ``if_parent_dead=`` when the ``Job`` is
built and keeps them on its instance state.  The flush that inserts the job
then locks its parents ``FOR KEY SHARE`` and writes its dependency rows on the
flush's connection (``after_flush_postexec``), in the caller's transaction:
commit publishes them with the job, rollback leaves neither.  A parent that
does not exist then raises ``JobNotFound`` out of the flush (roll back).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.orm import Session

from venturi_sa.errors import JobNotFound
from venturi_sa.models import JobBase, Models
from venturi_sa.storage import dependents
from venturi_sa.workflows import Waits, check_policy, parent_ids

_KEY = "venturi_after"
_PENDING = "venturi_after_jobs"


def defer(models: Models, job: JobBase, after: object, if_parent_dead: object) -> JobBase:
    """Check ``after=`` for a ``Job`` not added yet and keep it for the flush that inserts ``job``."""
    policy = check_policy(if_parent_dead)
    if after is not None:
        ids = parent_ids(models, None, after)
        if ids:
            sa.inspect(job).info[_KEY] = (models, ids, policy)
    return job


def _collect(session: Session, flush_context: Any) -> None:
    found = [obj for obj in session.new if isinstance(obj, JobBase) and _KEY in sa.inspect(obj).info]
    if found:
        session.info.setdefault(_PENDING, []).extend(found)


def _link(session: Session, flush_context: Any) -> None:
    jobs = session.info.pop(_PENDING, [])
    for job in jobs:
        models, ids, policy = sa.inspect(job).info.pop(_KEY)
        connection = session.connection()
        statuses = dependents.lock_parents(models, connection, ids)
        missing = [i for i in ids if i not in statuses]
        if missing:
            raise JobNotFound(f"after=: no job {', '.join(repr(i) for i in missing)} in queue "
                              f"{models.prefix!r} (parents must exist when the dependent is inserted)")
        Waits(models=models, session=session, parents=ids, policy=policy, statuses=statuses).attach([job.id])
        session.expire(job, ["status", "visible_at", "finished_at"])


event.listen(Session, "after_flush", _collect)
event.listen(Session, "after_flush_postexec", _link)
