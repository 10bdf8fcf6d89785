"""Tool calls: one row per call of an MCP server's tool (server, tool, duration, error), for the
admin session page and the per-server counts of ``/metrics``. The output itself is never kept here:
it is in the transcript, where pruning, clearing and erasure reach it. ``admin_overrides.tools``:
an admin-set override may narrow the MCP tools a chat is offered (``{include, exclude}`` globs).

Revision ID: 0016_tool_calls
Revises: 0015_stream_leases
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_tool_calls"
down_revision: str | Sequence[str] | None = "0015_stream_leases"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "tool_calls",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(32), nullable=False),
        sa.Column("server", sa.String(64), nullable=False),
        sa.Column("tool", sa.String(128), nullable=False),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("output_chars", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_tool_calls"),
    )
    op.create_index("ix_tool_calls_session_id", "tool_calls", ["session_id"])
    op.add_column("admin_overrides", sa.Column("tools", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("admin_overrides") as batch:
        batch.drop_column("tools")
    op.drop_index("ix_tool_calls_session_id", table_name="tool_calls")
    op.drop_table("tool_calls")
