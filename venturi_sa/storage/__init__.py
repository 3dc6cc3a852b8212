"""The storage seam: every SQL statement venturi runs lives in this package.

:class:`~venturi_sa.storage.backend.Backend` is the protocol (one verb per
state transition, each taking one frozen params object);
:class:`~venturi_sa.storage.adapter.SqlAlchemyBackend` is the default adapter
over the seed schema.  Nothing outside this package builds queries.
"""
