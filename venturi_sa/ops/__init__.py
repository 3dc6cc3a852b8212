"""Operating a queue: look at it (jobs, journals, history, stats), clean it up, act on one job.

One module per responsibility: :mod:`~venturi_sa.ops.history` (one job, its
journal, keyset-paged listings), :mod:`~venturi_sa.ops.stats`,
:mod:`~venturi_sa.ops.cleanup` (retention), :mod:`~venturi_sa.ops.admin`
(requeue, kill, release), :mod:`~venturi_sa.ops.cancel`,
:mod:`~venturi_sa.ops.pause` (and resume), :mod:`~venturi_sa.ops.edit` (and retry
now), :mod:`~venturi_sa.ops.explain`, the argument checks (:mod:`~venturi_sa.ops.checks`), the records they return
(:mod:`~venturi_sa.ops.records`) and the short transaction they all run in
(:mod:`~venturi_sa.ops.transaction`).  Every function takes an ``Engine`` and
opens its own short transactions, never the application's session; all SQL
is in its topic module of :mod:`venturi_sa.storage` (``storage.history``, ``storage.cleanup``, ...).
The public entry points are the methods of
:class:`~venturi_sa.ops.face.Operations` (``queue.<action>(engine, ...)``;
:class:`~venturi_sa.Queue` inherits them), whose ``*_async`` twins
:mod:`~venturi_sa.ops.twins` makes from them.  Only the records are
re-exported here, so ``venturi_sa.ops.history`` and friends always name the
modules, never a function of the same name.
"""

from __future__ import annotations

from venturi_sa.ops.records import KIND_KEYS, FireInfo, JobInfo, JobView, JournalInfo, Page, Stats

__all__ = ["KIND_KEYS", "FireInfo", "JobInfo", "JobView", "JournalInfo", "Page", "Stats"]
