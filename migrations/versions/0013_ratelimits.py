"""Rate limits shared by the cluster: one row per scope with the time its next send may go.

Revision ID: 0013_ratelimits
Revises: 0012_admin_overrides
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_ratelimits"
down_revision: str | Sequence[str] | None = "0012_admin_overrides"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rate_scopes",
        sa.Column("scope", sa.String(160), nullable=False),
        sa.Column("next_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("scope", name="pk_rate_scopes"),
    )


def downgrade() -> None:
    op.drop_table("rate_scopes")
