"""Per-chat overrides frozen into the session they started with.

``sessions.chat_overrides`` holds what the matching ``overrides:`` entry set when the session was
created (summary model, token budget, and which entry it was); the system prompt and model go into
their own columns as before. Frozen so that the cached prefix holds for the session's life; a
changed entry applies from the next session (``/new``).

Revision ID: 0010_chat_overrides
Revises: 0009_compaction_strategy
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_chat_overrides"
down_revision: str | Sequence[str] | None = "0009_compaction_strategy"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("chat_overrides", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("chat_overrides")
