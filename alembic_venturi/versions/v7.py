"""V7: owed ``on_dead`` calls: ``<prefix>_on_dead`` (a job that went dead where its task's code was not loaded)."""

from __future__ import annotations

from alembic_venturi.bodies import apply_body

revision = "v7"
down_revision = "v6"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_body("v7")


def downgrade() -> None:
    apply_body("v7_down")
