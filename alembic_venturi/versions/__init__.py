"""venturi's migration revisions, one module per version (``v1``, ``v2``, ...).

Alembic loads these files from this directory; each one applies its SQL body
from ``alembic_venturi/sql``.
"""
