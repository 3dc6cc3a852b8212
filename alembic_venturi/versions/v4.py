"""V4 (stand-in): the periodic branch's v4 replaces this at merge."""

from __future__ import annotations

from alembic_venturi.bodies import apply_body

revision = "v4"
down_revision = "v3"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_body("v4")


def downgrade() -> None:
    apply_body("v4_down")
