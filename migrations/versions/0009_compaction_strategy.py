"""Context engines: which strategy made each compaction, and the engines' fail-open events.

``compactions.strategy`` names the strategy of the context engine that produced the row (prune,
snip, summary, sliding, ...), so ``/context``, the admin page and ``/metrics`` can say what freed
how much. ``engine_failures`` keeps each time an engine raised, timed out or planned something
the validator refused and the built-in compressor served instead (counted by ``/metrics``,
which reads the store from another process).

Revision ID: 0009_compaction_strategy
Revises: 0008_view_version
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_compaction_strategy"
down_revision: str | Sequence[str] | None = "0008_view_version"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column(
        "compactions",
        sa.Column("strategy", sa.String(32), server_default=sa.text("'summary'"), nullable=False),
    )
    op.create_table(
        "engine_failures",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(32), nullable=True),
        sa.Column("engine", sa.String(64), nullable=False),
        sa.Column("operation", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_engine_failures"),
    )


def downgrade() -> None:
    op.drop_table("engine_failures")
    with op.batch_alter_table("compactions") as batch:
        batch.drop_column("strategy")
