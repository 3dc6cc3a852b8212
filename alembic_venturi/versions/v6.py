"""V6: per-job time limits: ``<prefix>_timeouts`` (an enqueue's ``timeout=`` overriding ``Task.timeout``)."""

from __future__ import annotations

from alembic_venturi.bodies import apply_body

revision = "v6"
down_revision = "v5"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_body("v6")


def downgrade() -> None:
    apply_body("v6_down")
