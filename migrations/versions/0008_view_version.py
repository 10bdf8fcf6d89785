"""The active view's version: one number per session, bumped with every change to its active set.

Each worker keeps the active views of the sessions it serves in memory
(``gateway.store.view_cache``). Every transaction that changes which messages are active, or
their content (an append, a compaction, its undo, an edit, an erase), also adds one to
``sessions.view_version``; a cached view is used only while its version is the current one, so a
change made by another worker (or an admin command in another process) is never missed.

Revision ID: 0008_view_version
Revises: 0007_streams
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_view_version"
down_revision: str | Sequence[str] | None = "0007_streams"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD COLUMN (both engines do it in place): no table rebuild under the foreign keys.
    op.add_column(
        "sessions", sa.Column("view_version", sa.Integer(), server_default=sa.text("0"), nullable=False)
    )


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("view_version")
