"""The storage seam: every SQL statement venturi runs lives in this package.

One module per responsibility (``claim``, ``outcomes``, ``leases``,
``enqueue``, ``history``, ``stats``, ``cleanup``, ``admin``); each verb takes
the queue's :class:`~venturi_sa.models.Models`, a Session or Connection in
the caller's transaction, and one frozen params object from
:mod:`~venturi_sa.storage.params`.  Nothing outside this package builds
queries, so a second storage adapter would replace exactly these modules.
"""
