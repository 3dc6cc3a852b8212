"""V2: the ``(created_at, id)`` history pagination index."""

from __future__ import annotations

from alembic_venturi.bodies import apply_body

revision = "v2"
down_revision = "v1"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_body("v2")


def downgrade() -> None:
    apply_body("v2_down")
