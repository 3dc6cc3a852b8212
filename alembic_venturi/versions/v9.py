"""V9: the archive of terminal jobs (``<prefix>_archive``, by day) and the jobs table's storage parameters."""

from __future__ import annotations

from alembic_venturi.bodies import apply_body

revision = "v9"
down_revision = "v8"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_body("v9")


def downgrade() -> None:
    apply_body("v9_down")
