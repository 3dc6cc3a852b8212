"""V8: trace context: ``<prefix>_traces`` (the enqueue's OpenTelemetry context, one row per job)."""

from __future__ import annotations

from alembic_venturi.bodies import apply_body

revision = "v8"
down_revision = "v7"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_body("v8")


def downgrade() -> None:
    apply_body("v8_down")
