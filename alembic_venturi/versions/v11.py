"""V11: the last start of each throttled ``(kind, dedup key)`` (``<prefix>_throttles``)."""

from __future__ import annotations

from alembic_venturi.bodies import apply_body

revision = "v11"
down_revision = "v10"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_body("v11")


def downgrade() -> None:
    apply_body("v11_down")
