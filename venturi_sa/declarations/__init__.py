"""Pure declarations: the values a task type declares and returns, and their checks, with no database.

The lowest layer above the base (errors, states, prefix): its modules import
only those, the standard library and third-party libraries (SQLAlchemy for
type annotations only), never the models, storage, tasks or the worker.
Each check raises ``InvalidOption`` naming the bad field when a value is
made or a task type is defined; nothing here reads or writes a database,
so commit, rollback and a crash have nothing of theirs to undo.

* :mod:`~venturi_sa.declarations.limit_rules` -- ``Rate``, ``KindLimits`` and their checks.
* :mod:`~venturi_sa.declarations.merge_rules` -- ``Debounce``, the merge timing and decisions.
* :mod:`~venturi_sa.declarations.run_outcomes` -- what ``run`` returns: ``Complete``, ``Pause``, ``Retry``, ``Die``.
* :mod:`~venturi_sa.declarations.time_checks` -- time limits, delays and ``run_at``.
* :mod:`~venturi_sa.declarations.task_contexts` -- ``JobContext`` and ``OutcomeContext``: what handlers see.
"""
