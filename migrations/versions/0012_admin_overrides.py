"""Per-chat overrides set by an admin on the admin page, beside the config's ``overrides:``.

One row per platform, chat and thread (``""``: the whole chat), setting any of the system
prompt, model, summary model and token budget. Resolved with the config's entries when a
session starts (most specific first; at the same level the admin's row wins) and frozen into
``sessions.chat_overrides`` as before; see docs/decisions.md.

Revision ID: 0012_admin_overrides
Revises: 0011_clearing_runs
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_admin_overrides"
down_revision: str | Sequence[str] | None = "0011_clearing_runs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "admin_overrides",
        sa.Column("platform", sa.String(64), nullable=False),
        sa.Column("chat", sa.String(128), nullable=False),
        sa.Column("thread", sa.String(128), nullable=False),
        sa.Column("system_prompt", sa.Text(), nullable=True),
        sa.Column("model", sa.String(128), nullable=True),
        sa.Column("summary_model", sa.String(128), nullable=True),
        sa.Column("budget_tokens", sa.Integer(), nullable=True),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("updated_by", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("platform", "chat", "thread", name="pk_admin_overrides"),
    )


def downgrade() -> None:
    op.drop_table("admin_overrides")
