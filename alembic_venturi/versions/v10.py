"""V10: limit keys, runtime limit overrides and their history, the rate log, fairness state."""

from __future__ import annotations

from alembic_venturi.bodies import apply_body

revision = "v10"
down_revision = "v9"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_body("v10")


def downgrade() -> None:
    apply_body("v10_down")
