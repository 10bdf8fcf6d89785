"""Strategy runs that make no compaction row: the API's server-side tool-result clearing.

Clearing edits the request, not the store, so it leaves no ``compactions`` row; each call whose
response reports ``applied_edits`` (``cleared_input_tokens``) is kept in ``strategy_runs``, and
``/metrics`` and ``/context`` count those runs and tokens with the compactions' per strategy.

Revision ID: 0011_clearing_runs
Revises: 0010_chat_overrides
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_clearing_runs"
down_revision: str | Sequence[str] | None = "0010_chat_overrides"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "strategy_runs",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(32), nullable=False),
        sa.Column("strategy", sa.String(32), nullable=False),
        sa.Column("tokens_freed", sa.Integer(), nullable=False),
        sa.Column("detail", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_strategy_runs"),
    )
    op.create_index("ix_strategy_runs_session_id", "strategy_runs", ["session_id"])


def downgrade() -> None:
    op.drop_index("ix_strategy_runs_session_id", table_name="strategy_runs")
    op.drop_table("strategy_runs")
