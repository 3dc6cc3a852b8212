"""V3: reshaped claim, dedup and journal indexes, ``_jobs_finished``, no journal-kind index."""

from __future__ import annotations

from alembic_venturi.bodies import apply_body

revision = "v3"
down_revision = "v2"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_body("v3")


def downgrade() -> None:
    apply_body("v3_down")
