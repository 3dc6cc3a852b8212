"""V1: the queue's tables and their original indexes."""

from __future__ import annotations

from alembic_venturi.bodies import apply_body

revision = "v1"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_body("v1")


def downgrade() -> None:
    apply_body("v1_down")
