"""Alembic environment for venturi's own migrations: one queue prefix per run.

:mod:`alembic_venturi.runner` builds the ``Config`` and puts the prefix (and,
online, an open connection whose transaction it owns) in ``config.attributes``.
The version table is ``<prefix>_alembic_version``, so every queue in a
database tracks its migrations on its own.
"""

from __future__ import annotations

from alembic import context

from alembic_venturi.bodies import CONNECTION_ATTRIBUTE, PREFIX_ATTRIBUTE
from venturi_sa.prefix import Names

config = context.config
if PREFIX_ATTRIBUTE not in config.attributes:
    raise RuntimeError(
        "run venturi migrations with alembic_venturi.upgrade()/downgrade(), "
        "which pass the queue prefix"
    )
names = Names(config.attributes[PREFIX_ATTRIBUTE])  # validates, or raises BadPrefix

if context.is_offline_mode():
    context.configure(
        dialect_name="postgresql",
        version_table=names.version_table,
        literal_binds=True,
        transactional_ddl=True,
    )
else:
    connection = config.attributes.get(CONNECTION_ATTRIBUTE)
    if connection is None:
        raise RuntimeError(
            "run venturi migrations with alembic_venturi.upgrade()/downgrade(), "
            "which pass an open connection"
        )
    context.configure(
        connection=connection,
        version_table=names.version_table,
        transactional_ddl=True,
    )

with context.begin_transaction():
    context.run_migrations()
