"""Dead letters: an outbox row says what it is, so a failure notice is never followed by another.

``outbox.kind``: ``reply`` (an answer), ``notice`` (a status line to the chat) or
``failure_notice`` (telling the chat that a message could not be processed or delivered).
Failed inbox and outbox rows (``status = 'failed'`` with their ``error``) are the dead letters.

Revision ID: 0004_dead_letters
Revises: 0007_streams (written on 0002; chained after the merged 0005_scheduler -> 0006_admin -> 0007_streams)
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_dead_letters"
down_revision: str | Sequence[str] | None = "0003_search_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("kind", sa.String(16), server_default=sa.text("'reply'"), nullable=False))
        batch.create_check_constraint(op.f("ck_outbox_kind"), "kind IN ('reply', 'notice', 'failure_notice')")


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_constraint(op.f("ck_outbox_kind"), type_="check")
        batch.drop_column("kind")
