"""V5: runtime control: ``<prefix>_pauses`` (paused kinds) and ``<prefix>_cancels`` (cancel requests)."""

from __future__ import annotations

from alembic_venturi.bodies import apply_body

revision = "v5"
down_revision = "v4"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_body("v5")


def downgrade() -> None:
    apply_body("v5_down")
