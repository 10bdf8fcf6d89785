"""Streamed replies: which platform messages show a reply while it is written.

Revision ID: 0007_streams
Revises: 0006_admin
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_streams"
down_revision: str | Sequence[str] | None = "0006_admin"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "streams",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(32), nullable=True),
        sa.Column("target", sa.JSON(), nullable=False),
        sa.Column("message_ids", sa.JSON(), nullable=True),
        sa.Column("shown", sa.JSON(), nullable=True),
        sa.Column("status", sa.String(16), server_default=sa.text("'open'"), nullable=False),
        sa.Column("outbox_id", BIG_ID, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name="fk_streams_session_id_sessions", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_streams"),
        sa.CheckConstraint("status IN ('open', 'done', 'interrupted')", name=op.f("ck_streams_status")),
    )
    op.create_index("ix_streams_status", "streams", ["status"])


def downgrade() -> None:
    op.drop_index("ix_streams_status", table_name="streams")
    op.drop_table("streams")
