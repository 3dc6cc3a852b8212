"""${message}"""

from __future__ import annotations

from alembic_venturi.bodies import apply_body

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_body(${repr(up_revision)})


def downgrade() -> None:
    apply_body(${repr(up_revision + "_down")})
