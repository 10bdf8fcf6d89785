"""The admin console: usage per session and day, who did what in the audit trail, messages by author.

- ``usage_daily``: usage and cost summed per (session, UTC day), kept by every recorded call,
  so cost views and "sort by cost" never scan the per-call ``usage`` table; filled here from
  the calls already recorded.
- ``audit.actor``, ``audit.session_id``, ``audit.counts``: an admin action's who, where and
  what it changed.
- ``ix_messages_author_id``: erasing a user's data finds their messages by author.

Revision ID: 0006_admin
Revises: 0002_message_edits
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_admin"
down_revision: str | Sequence[str] | None = "0005_scheduler"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DAY = {
    # SQLite keeps UTC as a naive ISO string; PostgreSQL a timestamptz.
    "sqlite": "substr(created_at, 1, 10)",
    "postgresql": "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
}


def upgrade() -> None:
    op.create_table(
        "usage_daily",
        sa.Column("session_id", sa.String(32), nullable=False),
        sa.Column("day", sa.String(10), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name="fk_usage_daily_session_id_sessions", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("session_id", "day", name="pk_usage_daily"),
    )
    op.create_index("ix_usage_daily_day", "usage_daily", ["day"])
    day = _DAY[op.get_bind().dialect.name]
    op.execute(
        "INSERT INTO usage_daily (session_id, day, calls, input_tokens, cache_write_tokens, "
        "cache_read_tokens, output_tokens, cost_usd) "
        f"SELECT session_id, {day}, count(*), sum(input_tokens), sum(cache_write_tokens), "
        f"sum(cache_read_tokens), sum(output_tokens), sum(cost_usd) FROM usage GROUP BY session_id, {day}"
    )
    with op.batch_alter_table("audit") as batch:
        batch.add_column(sa.Column("actor", sa.String(255), nullable=True))
        batch.add_column(sa.Column("session_id", sa.String(32), nullable=True))
        batch.add_column(sa.Column("counts", sa.JSON(), nullable=True))
    op.create_index("ix_messages_author_id", "messages", ["author_id"])


def downgrade() -> None:
    op.drop_index("ix_messages_author_id", table_name="messages")
    with op.batch_alter_table("audit") as batch:
        batch.drop_column("counts")
        batch.drop_column("session_id")
        batch.drop_column("actor")
    op.drop_index("ix_usage_daily_day", table_name="usage_daily")
    op.drop_table("usage_daily")
