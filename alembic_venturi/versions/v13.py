"""V13: durable steps, sleeps and waits of a job (``<prefix>_steps``) and the signals sent (``<prefix>_signals``)."""

from __future__ import annotations

from alembic_venturi.bodies import apply_body

revision = "v13"
down_revision = "v12"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_body("v13")


def downgrade() -> None:
    apply_body("v13_down")
