"""Stream leases: a streamed reply belongs to the session lease under which it was opened.

- ``streams.session_key`` and ``streams.lease_owner``: the inbox claim (session key, worker) the
  stream was opened under. Recovery touches only streams whose claim is no longer live: a worker
  starting, or taking a chat over, leaves other workers' live replies alone.
- ``outbox.stream_id``: a reply re-delivered after a takeover whose stream already shows messages
  edits those messages instead of sending new ones.

Revision ID: 0015_stream_leases
Revises: 0014_lean_rows
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_stream_leases"
down_revision: str | Sequence[str] | None = "0014_lean_rows"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("streams", sa.Column("session_key", sa.String(255), nullable=True))
    op.add_column("streams", sa.Column("lease_owner", sa.String(128), nullable=True))
    op.create_index("ix_streams_session_key_status", "streams", ["session_key", "status"])
    op.add_column("outbox", sa.Column("stream_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite")))


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("stream_id")
    op.drop_index("ix_streams_session_key_status", table_name="streams")
    with op.batch_alter_table("streams") as batch:
        batch.drop_column("lease_owner")
        batch.drop_column("session_key")
