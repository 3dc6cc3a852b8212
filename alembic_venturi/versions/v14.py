"""V14: archived jobs keep their steps, signals and limit key (``steps``, ``signals``, ``limit_key`` on the archive)."""

from __future__ import annotations

from alembic_venturi.bodies import apply_body

revision = "v14"
down_revision = "v13"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_body("v14")


def downgrade() -> None:
    apply_body("v14_down")
