"""V4: periodic jobs: ``_schedules`` (one row per schedule) and ``_fires`` (one per fired fire time)."""

from __future__ import annotations

from alembic_venturi.bodies import apply_body

revision = "v4"
down_revision = "v3"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_body("v4")


def downgrade() -> None:
    apply_body("v4_down")
