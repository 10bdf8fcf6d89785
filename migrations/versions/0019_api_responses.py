"""The OpenAI-compatible API's response ids: ``previous_response_id`` finds its conversation.

A row per ``/v1/responses`` answer: the id handed out, the key name that asked (a key never
finds another key's responses) and the conversation (and session key) it belongs to.

Revision ID: 0019_api_responses
Revises: 0018_cache_diagnostics
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_api_responses"
down_revision: str | Sequence[str] | None = "0018_cache_diagnostics"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "api_responses",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("key_name", sa.String(64), nullable=False),
        sa.Column("conversation", sa.String(128), nullable=False),
        sa.Column("session_key", sa.String(255), nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_api_responses_key_name", "api_responses", ["key_name"])


def downgrade() -> None:
    op.drop_index("ix_api_responses_key_name", table_name="api_responses")
    op.drop_table("api_responses")
