"""The storage seam: every SQL statement venturi runs lives in this package.

:mod:`~venturi_sa.storage.backend` defines the :class:`Backend` protocol, one
verb per state transition (claim, finish_many, renew, recover,
soonest_visible, insert_jobs, insert_rows, lock_dedup, find_merge_target, record_merges,
history_page, stats, cleanup_batch, admin_apply, ...), and its SQLAlchemy
implementation.  Each verb takes a Session or Connection in the caller's
transaction (it never commits) and one frozen keyword-only params object,
defined in :mod:`~venturi_sa.storage.params` (the worker's verbs) or beside
the SQL that uses it (``enqueue``, ``history``, ``stats``, ``cleanup``,
``admin``).  Nothing outside this package builds queries;
:mod:`~venturi_sa.storage.faults` says which database errors are transient.
"""
