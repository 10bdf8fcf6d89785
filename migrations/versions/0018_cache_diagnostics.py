"""Cache diagnostics: each chat call's miss reason, as the API named it, and our part in it.

``usage.cache_miss_reason`` is ``diagnostics.cache_miss_reason.type`` of the response (or
``first_call`` for a session's first call that wrote the cache; NULL: the prefix was reused,
or the call carried no diagnostics), ``cache_missed_tokens`` the tokens the API says would
have been read, ``cache_cause`` what we changed ourselves (compaction, catalog, model,
new_session, none) and ``cache_miss_ours`` whether the miss is of our making. See
docs/models-and-cost.md ("Cache diagnostics").

Revision ID: 0018_cache_diagnostics
Revises: 0017_delegations
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018_cache_diagnostics"
down_revision: str | Sequence[str] | None = "0017_delegations"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable columns added in place (no table copy on SQLite: the usage table is the biggest).
    op.add_column("usage", sa.Column("cache_miss_reason", sa.String(32), nullable=True))
    op.add_column("usage", sa.Column("cache_missed_tokens", sa.Integer(), nullable=True))
    op.add_column("usage", sa.Column("cache_cause", sa.String(16), nullable=True))
    op.add_column("usage", sa.Column("cache_miss_ours", sa.Boolean(), nullable=True))
    # The metrics count misses by reason on every scrape: only the (few) missed calls are read.
    op.create_index("ix_usage_cache_miss_reason", "usage", ["cache_miss_reason"])


def downgrade() -> None:
    op.drop_index("ix_usage_cache_miss_reason", table_name="usage")
    op.drop_column("usage", "cache_miss_ours")
    op.drop_column("usage", "cache_cause")
    op.drop_column("usage", "cache_missed_tokens")
    op.drop_column("usage", "cache_miss_reason")
