"""V12: jobs that wait for other jobs: ``<prefix>_waits`` (one per waiting job) and ``<prefix>_parents``."""

from __future__ import annotations

from alembic_venturi.bodies import apply_body

revision = "v12"
down_revision = "v11"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_body("v12")


def downgrade() -> None:
    apply_body("v12_down")
