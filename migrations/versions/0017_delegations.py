"""Delegations: a sub-agent's transcript is a session of its own, linked to the chat that asked.

``sessions.parent_session_id`` names the session whose ``delegate`` tool call ran it (NULL for
every chat). The sub-agent's session is ended when it finishes and its messages archived, so it
never shows as a live chat; the parent chat's ``session_search`` and the admin search still
find them. See docs/decisions.md ("Delegation").

Revision ID: 0017_delegations
Revises: 0016_tool_calls
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_delegations"
down_revision: str | Sequence[str] | None = "0016_tool_calls"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain indexed column, no foreign key: SQLite adds it in place (a batch copy of `sessions`
    # would rebuild the table every search view and trigger names, locked mid-migration and slow on
    # a big archive), and sessions are never deleted, so nothing can dangle.
    op.add_column("sessions", sa.Column("parent_session_id", sa.String(32), nullable=True))
    op.create_index("ix_sessions_parent_session_id", "sessions", ["parent_session_id"])


def downgrade() -> None:
    op.drop_index("ix_sessions_parent_session_id", table_name="sessions")
    op.drop_column("sessions", "parent_session_id")
