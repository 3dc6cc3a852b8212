"""Every SQL statement venturi runs lives in this package (``tests/unit/architecture`` enforces it).

One module per topic, each function taking the queue's ``Models``, a
Session or Connection in the caller's transaction (it never commits) and,
where it has parameters, one frozen keyword-only params object defined
beside it: ``enqueue``, ``history``, ``stats``, ``cleanup``, ``admin``,
``pauses``, ``cancels``, ``edits``, ``explain`` (the facts ``explain`` reads),
``timeouts``, ``schedules``,
``on_dead``, ``dashboard`` and ``overview`` (the dashboard's reads),
``traces``, ``catalog``, ``testing``.  Their callers (enqueue, ``ops``,
``periodic``, ``web``, ``testing``) call them directly.

The worker's verbs are the seam a second store replaces:
:mod:`~venturi_sa.storage.backend` defines :class:`Backend` (claim,
finish_many, renew, recover, soonest_visible, checkpoint, ping; their
params and records are in :mod:`~venturi_sa.storage.params`) and the
``Transactions`` they run in, implemented by ``SqlAlchemyBackend`` (the SQL
of ``throttled_claim``, ``limited_claim``, ``claim``, ``outcomes``,
``leases``, ``recovery``, ``checkpoint``) and by
:class:`~venturi_sa.storage.memory.MemoryBackend` (tests only).  Beside it,
:mod:`~venturi_sa.storage.durable_backend` defines ``DurableBackend``
(``ctx.step``, ``ctx.sleep``, ``ctx.wait_for`` and ``ctx.parents``; params
and records in :mod:`~venturi_sa.storage.durable_params`), implemented by
``sql_steps.SqlSteps`` and ``memory_steps.MemorySteps``, mixed into the two
backends.
:mod:`~venturi_sa.storage.faults` says which database errors are transient;
:mod:`~venturi_sa.storage.drivers` holds the only driver-specific code.
"""
