"""Scheduled jobs and tasks: named leases, the jobs' cluster-wide state, reminders and recurring tasks.

Revision ID: 0005_scheduler
Revises: 0002_message_edits
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_scheduler"
down_revision: str | Sequence[str] | None = "0004_dead_letters"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("acquired_at", TS, nullable=False),
        sa.Column("renewed_at", TS, nullable=False),
        sa.Column("expires_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_leases"),
    )
    op.create_table(
        "scheduler_jobs",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("schedule", sa.String(255), server_default=sa.text("''"), nullable=False),
        sa.Column("next_due_at", TS, nullable=True),
        sa.Column("last_started_at", TS, nullable=True),
        sa.Column("last_finished_at", TS, nullable=True),
        sa.Column("last_status", sa.String(16), nullable=True),
        sa.Column("last_owner", sa.String(128), nullable=True),
        sa.Column("last_result", sa.JSON(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_duration_ms", sa.Integer(), nullable=True),
        sa.Column("runs", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("failures", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.CheckConstraint(
            "last_status IN ('running', 'ok', 'failed')", name=op.f("ck_scheduler_jobs_last_status")
        ),
        sa.PrimaryKeyConstraint("name", name="pk_scheduler_jobs"),
    )
    op.create_table(
        "scheduled_tasks",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("session_key", sa.String(255), nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("thread_id", sa.String(128), nullable=True),
        sa.Column("session_id", sa.String(32), nullable=True),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("spec", sa.String(255), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), server_default=sa.text("'active'"), nullable=False),
        sa.Column("next_run_at", TS, nullable=True),
        sa.Column("last_run_at", TS, nullable=True),
        sa.Column("runs", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("ended_at", TS, nullable=True),
        sa.CheckConstraint("kind IN ('at', 'cron', 'every')", name=op.f("ck_scheduled_tasks_kind")),
        sa.CheckConstraint(
            "status IN ('active', 'done', 'cancelled')", name=op.f("ck_scheduled_tasks_status")
        ),
        sa.PrimaryKeyConstraint("id", name="pk_scheduled_tasks"),
    )
    op.create_index("ix_scheduled_tasks_status_next_run_at", "scheduled_tasks", ["status", "next_run_at"])
    op.create_index("ix_scheduled_tasks_session_key_status", "scheduled_tasks", ["session_key", "status"])


def downgrade() -> None:
    op.drop_index("ix_scheduled_tasks_session_key_status", table_name="scheduled_tasks")
    op.drop_index("ix_scheduled_tasks_status_next_run_at", table_name="scheduled_tasks")
    op.drop_table("scheduled_tasks")
    op.drop_table("scheduler_jobs")
    op.drop_table("leases")
