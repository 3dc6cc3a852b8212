"""Jobs that wait for other jobs: their dependency rows, and their release or kill when parents end.

A dependent (a job enqueued with ``after=[...]``) is ``pending`` with
``visible_at = 'infinity'`` while ``<prefix>_waits.remaining`` (its parents
not yet counted as terminal) is above zero.  The count, not the marker, says
that a job waits for its parents: a job waiting for a signal with no timeout
is at ``'infinity'`` too (with a count of zero if it has parents).  Every transaction that makes a
job terminal calls :func:`settle` with the ids it ended, in that same
transaction (an outcome batch only with the ids its own statement found
named by a dependency row not yet done: read after its row locks, the same
rows settle would read, so a batch without dependents sends no settle):
one statement marks their ``<prefix>_parents`` rows done
(found through the ``parent_id`` index first: an id without dependents
costs one index probe, and the jobs table is read only for the parents of
waiting jobs), locks the dependents' ``<prefix>_waits`` rows in ascending
``job_id`` order (two outcome batches with shared dependents cannot
deadlock), decrements them with ``UPDATE … RETURNING``, and then

* kills (``dead``, one journal row naming the parent, an owed ``on_dead``
  call) a waiting dependent whose parent ended ``dead`` under the
  ``cancel`` policy, and
* releases (``visible_at = greatest(now, not_before)``, a ``NOTIFY`` per
  kind on commit) a waiting dependent whose count reached zero.

Before settling, every such transaction has locked the jobs it ended
``FOR UPDATE`` (a statement of its own), which waits for the ``FOR KEY
SHARE`` that an ``after=`` enqueue holds on its parents: settle then reads
every dependency row committed by then, and a later enqueue sees the parent
terminal.  The row lock serializes the last parents of a fan-in finishing at once on
different workers: each decrement sees the other's, and only the one that
reaches zero releases.  Killed dependents are settled in turn, down the
chain.  Nothing here commits; on rollback nothing happened.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from venturi_sa.errors import UnsupportedIsolation
from venturi_sa.models import Models
from venturi_sa.storage import driver_sql, infinite_times
from venturi_sa.storage.params import Runner

infinite_times.register()  # a waiting job's visible_at is 'infinity': psycopg 3 must be able to read it

ISOLATIONS = ("read committed",)
"""The isolation levels ``after=`` works under: a later statement must see parents' committed outcomes."""

_IDS = postgresql.ARRAY(sa.Text)


def _names(models: Models) -> dict[str, str]:
    n = models.names
    return {"jobs": n.jobs, "journal": n.journal, "on_dead": n.on_dead, "cancels": n.cancels,
            "waits": models.workflow.waits_table.name, "parents": models.workflow.parents_table.name}


_STATEMENTS: dict[tuple[str, str], sa.TextClause] = {}


def _statement(models: Models, name: str, text: str, **types: Any) -> sa.TextClause:
    key = (models.prefix, name)
    if key not in _STATEMENTS:
        clause = sa.text(text.format(**_names(models)))
        _STATEMENTS[key] = clause.bindparams(*(sa.bindparam(k, type_=t) for k, t in types.items()))
    return _STATEMENTS[key]


_LOCK_ENDED = "SELECT j.id FROM {jobs} AS j WHERE j.id = ANY(:ids) ORDER BY j.id FOR UPDATE OF j"
_SETTLE = """
WITH waiting AS MATERIALIZED (
    SELECT p.job_id, p.position FROM {parents} AS p
    WHERE p.parent_id = ANY(:ids) AND NOT p.done
), links AS MATERIALIZED (
    UPDATE {parents} AS p SET done = true
    FROM waiting AS w, {jobs} AS j
    WHERE p.job_id = w.job_id AND p.position = w.position AND NOT p.done
      AND j.id = p.parent_id AND j.status IN ('completed', 'dead')
    RETURNING p.job_id, p.position, p.parent_id, p.policy, j.status
), locked AS MATERIALIZED (
    SELECT w.job_id FROM {waits} AS w
    WHERE w.job_id IN (SELECT l.job_id FROM links AS l)
    ORDER BY w.job_id
    FOR UPDATE
), counted AS (
    SELECT l.job_id, count(*) AS n,
           (array_agg(l.parent_id ORDER BY l.position)
               FILTER (WHERE l.status = 'dead' AND l.policy = 'cancel'))[1] AS killer
    FROM links AS l GROUP BY l.job_id
), counted_down AS (
    UPDATE {waits} AS w
    SET remaining = w.remaining - c.n, killed_by = coalesce(w.killed_by, c.killer)
    FROM counted AS c, locked AS k
    WHERE w.job_id = c.job_id AND k.job_id = c.job_id
    RETURNING w.job_id, w.remaining, w.not_before, c.killer
), killed AS (
    UPDATE {jobs} AS j SET status = 'dead', finished_at = clock_timestamp()
    FROM counted_down AS d
    WHERE j.id = d.job_id AND d.killer IS NOT NULL
      AND j.status = 'pending' AND j.visible_at = 'infinity'
    RETURNING j.id, j.kind, j.run_count,
              'not run: its parent ' || d.killer || ' ended dead (if_parent_dead=''cancel'')' AS note
), released AS (
    UPDATE {jobs} AS j SET visible_at = greatest(clock_timestamp(), d.not_before)
    FROM counted_down AS d
    WHERE j.id = d.job_id AND d.killer IS NULL AND d.remaining <= 0
      AND j.status = 'pending' AND j.visible_at = 'infinity'
    RETURNING j.kind
), logged AS (
    INSERT INTO {journal} (job_id, kind, run_no, recorded_at, outcome, note)
    SELECT k.id, k.kind, k.run_count, clock_timestamp(), 'dead', k.note FROM killed AS k
), owed AS (
    INSERT INTO {on_dead} (job_id, kind, run_no, note, actor, created_at, not_before)
    SELECT k.id, k.kind, k.run_count, k.note, 'venturi', now(), now() FROM killed AS k
), cleared AS (
    DELETE FROM {cancels} AS r WHERE r.job_id IN (SELECT k.id FROM killed AS k)
)
SELECT (SELECT coalesce(array_agg(k.id), '{{}}') FROM killed AS k) AS killed,
       (SELECT count(*) FROM (SELECT DISTINCT r.kind FROM released AS r) AS w,
                             pg_notify(:channel, w.kind)) AS woken
"""


def settle(models: Models, runner: Runner, ended: Sequence[str]) -> None:
    """Apply the terminal outcomes of ``ended`` (job ids) to their waiting dependents, in ``runner``'s transaction.

    The caller has locked the rows of ``ended`` ``FOR UPDATE`` in an earlier
    statement (so every ``after=`` enqueue naming one of them has committed,
    and the ones to come wait for this transaction and see it terminal).
    Ids that are not terminal are ignored, and a parent is counted once per
    dependency however often this is called.  Dependents it kills are
    locked the same way, then settled in turn.  Called by every write that
    makes a job terminal.
    """
    stmt = _statement(models, "settle", _SETTLE, ids=_IDS, channel=sa.Text)
    text = driver_sql.driver_text(runner, stmt)  # on every outcome batch: sent as driver SQL where it can be
    ids = list(ended)
    first = True
    while ids:
        if not first:  # the dependents just killed: wait for enqueuers naming them (their callers locked ``ended``)
            runner.execute(_statement(models, "lock_ended", _LOCK_ENDED, ids=_IDS), {"ids": ids}).all()
        first = False
        binds: dict[str, Any] = {"ids": ids, "channel": models.names.channel}
        rows: Any
        if text is None:
            rows = runner.execute(stmt, binds)
        else:
            rows = driver_sql.execute(cast(sa.Connection, runner), text[0], text[1], binds)
        ids = list(rows.scalar_one())


@dataclass(frozen=True, kw_only=True)
class ParentState:
    """A parent named by ``after=``: its id and status (read under ``FOR KEY SHARE``, or from the archive)."""

    id: str
    status: str


_LOCK_PARENTS = """
SELECT j.id, j.status, current_setting('transaction_isolation') AS isolation
FROM {jobs} AS j
WHERE j.id = ANY(:ids) AND current_setting('transaction_isolation') = 'read committed'
ORDER BY j.id
FOR KEY SHARE OF j
"""
_ARCHIVED = "SELECT a.id, a.status FROM {archive} AS a WHERE a.id = ANY(:ids)"
_ISOLATION = "SELECT current_setting('transaction_isolation')"


def lock_parents(models: Models, runner: Runner, ids: Sequence[str]) -> dict[str, str]:
    """Lock the parents ``ids`` ``FOR KEY SHARE`` (in id order) until the caller's transaction ends; their statuses.

    Every write that makes a job terminal locks its row ``FOR UPDATE`` before
    it settles its dependents, and that lock waits for this one: a parent's
    terminal transaction either committed before this read (its status is
    read terminal) or settles after the caller's commit (it sees the
    dependency rows), so no release is lost.  ``FOR KEY SHARE`` does not
    conflict with the running parent's lease renewal (``FOR NO KEY UPDATE
    SKIP LOCKED``), however long the caller's transaction stays open; it
    holds back the parent's outcome write (and the claim of a pending parent)
    until the caller's transaction ends.  Parents already
    moved to the archive are read from it (they are terminal).  Ids found
    nowhere are missing from the result.  Raises ``UnsupportedIsolation``
    outside READ COMMITTED (nothing locked).
    """
    found = {r.id: r.status for r in runner.execute(
        _statement(models, "lock_parents", _LOCK_PARENTS, ids=_IDS), {"ids": list(ids)})}
    if len(found) < len(ids):
        isolation = runner.execute(sa.text(_ISOLATION)).scalar_one()
        if isolation not in ISOLATIONS:
            raise UnsupportedIsolation(
                f"enqueue with after= needs READ COMMITTED, but this transaction is {isolation.upper()}: "
                "a parent's outcome committed after its snapshot would be missed and its dependent never "
                "released; enqueue dependents in a READ COMMITTED transaction (PostgreSQL's default)")
        missing = [i for i in ids if i not in found]
        archive = _statement(models, "archived", _ARCHIVED.replace("{archive}", models.names.archive), ids=_IDS)
        found.update({r.id: r.status for r in runner.execute(archive, {"ids": missing})})
    return found


@dataclass(frozen=True, kw_only=True)
class LinkParams:
    """Dependency rows for new jobs ``job_ids``: each waits for ``parents`` (in order) under ``policy``.

    ``remaining`` is how many parents are not terminal; with it above zero
    the jobs are made to wait (``visible_at = 'infinity'``, their own
    ``visible_at`` kept as ``not_before``).  ``killer`` names a parent
    already dead under the ``cancel`` policy: the jobs are inserted dead.
    """

    job_ids: Sequence[str]
    parents: Sequence[str]
    policy: str
    remaining: int
    killer: str | None = None


_LINK = """
WITH new AS (
    SELECT j.id, j.visible_at FROM {jobs} AS j WHERE j.id = ANY(:job_ids)
), links AS (
    INSERT INTO {parents} (job_id, position, parent_id, policy, done)
    SELECT n.id, p.position - 1, p.parent_id, :policy, s.status IN ('completed', 'dead')
    FROM new AS n
    CROSS JOIN unnest(CAST(:parents AS text[])) WITH ORDINALITY AS p (parent_id, position)
    JOIN unnest(CAST(:parents AS text[]), CAST(:statuses AS text[])) AS s (id, status) ON s.id = p.parent_id
), waits AS (
    INSERT INTO {waits} (job_id, remaining, not_before, killed_by)
    SELECT n.id, :remaining, n.visible_at, CAST(:killer AS text) FROM new AS n
)
UPDATE {jobs} AS j
SET visible_at = CASE WHEN :remaining > 0 AND :killer IS NULL THEN 'infinity' ELSE j.visible_at END,
    status = CASE WHEN :killer IS NULL THEN j.status ELSE 'dead' END,
    finished_at = CASE WHEN :killer IS NULL THEN j.finished_at ELSE clock_timestamp() END
FROM new AS n WHERE j.id = n.id AND (:remaining > 0 OR :killer IS NOT NULL)
RETURNING j.id
"""
_KILLED_AT_ENQUEUE = """
WITH dead AS (
    SELECT j.id, j.kind, j.run_count FROM {jobs} AS j WHERE j.id = ANY(:job_ids) AND j.status = 'dead'
), logged AS (
    INSERT INTO {journal} (job_id, kind, run_no, recorded_at, outcome, note)
    SELECT d.id, d.kind, d.run_count, clock_timestamp(), 'dead', :note FROM dead AS d
)
INSERT INTO {on_dead} (job_id, kind, run_no, note, actor, created_at, not_before)
SELECT d.id, d.kind, d.run_count, :note, 'venturi', now(), now() FROM dead AS d
"""


def link(models: Models, runner: Runner, params: LinkParams, statuses: dict[str, str]) -> None:
    """Insert the dependency rows of ``params.job_ids`` and make them wait (or end dead) in one statement.

    ``statuses`` gives each parent's status as :func:`lock_parents` read it.
    A dependent killed here gets a run-0 journal row naming the parent and an
    owed ``on_dead`` call.  The caller commits.
    """
    stmt = _statement(models, "link", _LINK, job_ids=_IDS, parents=_IDS, statuses=_IDS, policy=sa.Text,
                      remaining=sa.Integer, killer=sa.Text)
    runner.execute(stmt, {"job_ids": list(params.job_ids), "parents": list(params.parents),
                          "statuses": [statuses[p] for p in params.parents], "policy": params.policy,
                          "remaining": params.remaining, "killer": params.killer}).all()
    if params.killer is not None:
        note = f"not run: its parent {params.killer} was dead when it was enqueued (if_parent_dead='cancel')"
        runner.execute(_statement(models, "killed_at_enqueue", _KILLED_AT_ENQUEUE, job_ids=_IDS, note=sa.Text),
                       {"job_ids": list(params.job_ids), "note": note})


_REARM = """
WITH affected AS MATERIALIZED (
    SELECT p.job_id, p.position FROM {parents} AS p
    JOIN {waits} AS w ON w.job_id = p.job_id
    JOIN {jobs} AS c ON c.id = p.job_id
    WHERE p.parent_id = :parent AND p.done
      AND ((c.status = 'pending' AND c.visible_at = 'infinity' AND w.remaining > 0)
           OR (:with_dependents AND c.status = 'dead' AND w.killed_by = :parent))
    ORDER BY p.job_id
    FOR UPDATE OF w
), undone AS (
    UPDATE {parents} AS p SET done = false
    FROM affected AS a WHERE p.job_id = a.job_id AND p.position = a.position
    RETURNING p.job_id
), revived AS (
    UPDATE {jobs} AS c
    SET status = 'pending', finished_at = NULL, visible_at = 'infinity', failure_count = 0
    WHERE c.id IN (SELECT a.job_id FROM affected AS a) AND c.status = 'dead'
    RETURNING c.id, c.kind, c.run_count
), logged AS (
    INSERT INTO {journal} (job_id, kind, run_no, recorded_at, outcome, note)
    SELECT r.id, r.kind, r.run_count, clock_timestamp(), 'released',
           'requeued with its parent ' || :parent || ': waits for its parents again' FROM revived AS r
), counted AS (
    UPDATE {waits} AS w
    SET remaining = w.remaining + (SELECT count(*) FROM undone AS u WHERE u.job_id = w.job_id),
        killed_by = CASE WHEN w.killed_by = :parent THEN NULL ELSE w.killed_by END
    WHERE w.job_id IN (SELECT a.job_id FROM affected AS a)
)
SELECT coalesce(array_agg(r.id), '{{}}') FROM revived AS r
"""


_REWAIT = """
WITH own AS (
    UPDATE {waits} AS w SET killed_by = NULL WHERE w.job_id = :id RETURNING w.remaining
)
UPDATE {jobs} AS j SET visible_at = 'infinity'
WHERE j.id = :id AND j.status = 'pending' AND (SELECT o.remaining FROM own AS o) > 0
"""


def rearm(models: Models, runner: Runner, parent: str, *, with_dependents: bool = False,
          restore: Callable[[list[str]], object] | None = None) -> list[str]:
    """``parent`` is pending again (requeued): its waiting dependents count it as unfinished again.

    A waiting dependent is one whose count of unfinished parents is above
    zero, not any pending job at ``'infinity'``: a dependent released
    earlier that now waits for a signal with no timeout has that
    ``visible_at`` too, and is left as it is (it ran past its parents).

    If ``parent`` itself still has unfinished parents, it waits for them again.

    With ``with_dependents`` the dependents its death killed are requeued too
    (waiting again, journaled ``released``), and theirs, down the chain;
    ``restore(job_ids)`` is called first with each generation of jobs whose
    killed dependents are sought, to move back those that were archived
    (``storage.archive.restore_killed``).  Returns every job so requeued.
    The caller commits.
    """
    stmt = _statement(models, "rearm", _REARM, parent=sa.Text, with_dependents=sa.Boolean)
    runner.execute(_statement(models, "rewait", _REWAIT, id=sa.Text), {"id": parent})
    revived: list[str] = []
    frontier = [parent]
    while frontier:
        found: list[str] = []
        if with_dependents and restore is not None:
            restore(frontier)
        for job_id in frontier:
            found += runner.execute(stmt, {"parent": job_id, "with_dependents": with_dependents}).scalar_one()
        revived += found
        frontier = found
    return revived


_DOWNSTREAM = """
WITH RECURSIVE down (id) AS (
    SELECT p.job_id FROM {parents} AS p WHERE p.parent_id = :id
    UNION
    SELECT p.job_id FROM {parents} AS p JOIN down AS d ON p.parent_id = d.id
)
SELECT j.id FROM {jobs} AS j JOIN down AS d ON d.id = j.id
WHERE j.status IN ('pending', 'claimed')
ORDER BY j.id
"""


def downstream(models: Models, runner: Runner, job_id: str) -> list[str]:
    """Every transitive dependent of ``job_id`` that is not terminal yet, in id order."""
    stmt = _statement(models, "downstream", _DOWNSTREAM, id=sa.Text)
    return list(runner.execute(stmt, {"id": job_id}).scalars())


_NO_LIVE_DEPENDENT = """NOT EXISTS (
    SELECT 1 FROM {parents} AS live_p JOIN {jobs} AS live_c ON live_c.id = live_p.job_id
    WHERE live_p.parent_id = {job_id} AND live_c.status IN ('pending', 'claimed') OFFSET 0)"""


def no_live_dependent_sql(models: Models, job_id: str) -> str:
    """SQL text: no job that is not terminal yet names ``job_id`` (a column reference of venturi's) in ``after=``.

    Cleanup and the archive's move keep such a parent: a requeue of it
    re-arms its dependents, and they read its result.  ``OFFSET 0`` keeps
    the ``EXISTS`` a per-row probe of ``_parents_parent`` (the planner would
    otherwise hash the whole dependency table against a batch of a few rows).
    """
    return _NO_LIVE_DEPENDENT.format(job_id=job_id, **_names(models))


def no_live_dependent(models: Models, job_id: Any) -> Any:
    """:func:`no_live_dependent_sql` as a Core predicate on the column ``job_id``."""
    link, child = models.workflow.parents_table.alias("live_p"), models.jobs_table.alias("live_c")
    live = (sa.select(sa.literal(1)).select_from(link.join(child, child.c.id == link.c.job_id))
            .where(link.c.parent_id == job_id, child.c.status.in_(["pending", "claimed"]))
            .offset(sa.literal_column("0")))
    return ~sa.exists(live)
