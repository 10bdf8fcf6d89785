"""Initial schema.

Tables: sessions, compactions, messages (+ full-text search), usage, inbox, outbox,
memories, audit.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001_initial"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # INTEGER on SQLite = rowid alias
TS = sa.DateTime(timezone=True)
ID = sa.String(32)

# SQLite: an external-content FTS5 index over messages.text. The update trigger fires on
# changes to ``text`` only, so archiving (flipping active/compacted) never touches the index.
SQLITE_FTS = [
    """CREATE VIRTUAL TABLE messages_fts USING fts5(
        text, content='messages', content_rowid='id', tokenize='unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts(rowid, text) VALUES (new.id, new.text);
    END""",
    """CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
    END""",
    """CREATE TRIGGER messages_fts_au AFTER UPDATE OF text ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
        INSERT INTO messages_fts(rowid, text) VALUES (new.id, new.text);
    END""",
]


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id", ID, nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("thread_id", sa.String(128), nullable=True),
        sa.Column("user_id", sa.String(128), nullable=True),
        sa.Column("system_prompt", sa.Text(), nullable=False),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("last_activity_at", TS, nullable=False),
        sa.Column("ended_at", TS, nullable=True),
        sa.Column("end_reason", sa.String(64), nullable=True),
        sa.Column("last_prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("last_prompt_at", TS, nullable=True),
        sa.Column("compaction_count", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("context_state", sa.JSON(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_sessions"),
    )
    op.create_index("ix_sessions_key", "sessions", ["key"])
    # At most one current (not ended) session per key.
    op.create_index(
        "uq_sessions_current_key",
        "sessions",
        ["key"],
        unique=True,
        sqlite_where=sa.text("ended_at IS NULL"),
        postgresql_where=sa.text("ended_at IS NULL"),
    )

    op.create_table(
        "compactions",
        sa.Column("id", ID, nullable=False),
        sa.Column("session_id", ID, nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("archived_from_seq", sa.Integer(), nullable=True),
        sa.Column("archived_to_seq", sa.Integer(), nullable=True),
        sa.Column("messages_archived", sa.Integer(), nullable=False),
        sa.Column("first_kept_id", BIG_ID, nullable=True),
        sa.Column("summary_message_id", BIG_ID, nullable=True),
        sa.Column("tokens_before", sa.Integer(), nullable=False),
        sa.Column("tokens_after", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("focus", sa.Text(), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("restored_at", TS, nullable=True),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name="fk_compactions_session_id_sessions", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_compactions"),
        sa.UniqueConstraint("session_id", "number", name="uq_compactions_session_id_number"),
        sa.CheckConstraint(
            "\"trigger\" IN ('hygiene', 'in_loop', 'reactive', 'manual', 'scheduled')",
            name=op.f("ck_compactions_trigger"),
        ),
        sa.CheckConstraint("status IN ('ok', 'fallback', 'failed')", name=op.f("ck_compactions_status")),
    )

    op.create_table(
        "messages",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("session_id", ID, nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("sub_seq", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.JSON(), nullable=False),
        sa.Column("text", sa.Text(), server_default=sa.text("''"), nullable=False),
        sa.Column("kind", sa.String(16), server_default=sa.text("'message'"), nullable=False),
        sa.Column("author_id", sa.String(128), nullable=True),
        sa.Column("author_name", sa.String(255), nullable=True),
        sa.Column("platform_message_id", sa.String(128), nullable=True),
        sa.Column("token_estimate", sa.Integer(), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("active", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("compacted", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("compaction_id", ID, nullable=True),
        sa.Column("produced_by", ID, nullable=True),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name="fk_messages_session_id_sessions", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["compaction_id"], ["compactions.id"], name="fk_messages_compaction_id_compactions"
        ),
        sa.ForeignKeyConstraint(
            ["produced_by"], ["compactions.id"], name="fk_messages_produced_by_compactions"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_messages"),
        sa.UniqueConstraint("session_id", "seq", "sub_seq", name="uq_messages_session_id_seq_sub_seq"),
        sa.CheckConstraint("role IN ('user', 'assistant')", name=op.f("ck_messages_role")),
        sa.CheckConstraint("kind IN ('message', 'summary', 'notice')", name=op.f("ck_messages_kind")),
    )
    op.create_index("ix_messages_active_view", "messages", ["session_id", "active", "seq", "sub_seq"])
    op.create_index("ix_messages_compaction_id", "messages", ["compaction_id"])
    op.create_index("ix_messages_produced_by", "messages", ["produced_by"])
    op.create_index(
        "uq_messages_session_id_platform_message_id",
        "messages",
        ["session_id", "platform_message_id"],
        unique=True,
        sqlite_where=sa.text("platform_message_id IS NOT NULL"),
        postgresql_where=sa.text("platform_message_id IS NOT NULL"),
    )

    op.create_table(
        "usage",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("session_id", ID, nullable=False),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("purpose", sa.String(16), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("cache_write_tokens", sa.Integer(), nullable=False),
        sa.Column("cache_read_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("estimated", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name="fk_usage_session_id_sessions", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_usage"),
    )
    op.create_index("ix_usage_session_id", "usage", ["session_id"])

    op.create_table(
        "inbox",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("platform_message_id", sa.String(128), nullable=True),
        sa.Column("session_key", sa.String(255), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("addressed", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(16), server_default=sa.text("'pending'"), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("lease_owner", sa.String(128), nullable=True),
        sa.Column("lease_until", TS, nullable=True),
        sa.Column("received_at", TS, nullable=False),
        sa.Column("processed_at", TS, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("message_id", BIG_ID, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_inbox"),
        sa.UniqueConstraint(
            "platform", "chat_id", "platform_message_id", name="uq_inbox_platform_chat_id_platform_message_id"
        ),
        sa.CheckConstraint(
            "status IN ('pending', 'processing', 'done', 'failed', 'ignored')", name=op.f("ck_inbox_status")
        ),
    )
    op.create_index("ix_inbox_status_received_at", "inbox", ["status", "received_at"])
    op.create_index("ix_inbox_session_key_status", "inbox", ["session_key", "status"])

    op.create_table(
        "outbox",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("session_id", ID, nullable=True),
        sa.Column("target", sa.JSON(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), server_default=sa.text("'pending'"), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("next_attempt_at", TS, nullable=False),
        sa.Column("delivered_ids", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("sent_at", TS, nullable=True),
        sa.Column("message_id", BIG_ID, nullable=True),
        sa.Column("inbox_ids", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name="fk_outbox_session_id_sessions", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_outbox"),
        sa.CheckConstraint("status IN ('pending', 'sent', 'failed')", name=op.f("ck_outbox_status")),
    )
    op.create_index("ix_outbox_status_next_attempt_at", "outbox", ["status", "next_attempt_at"])

    op.create_table(
        "memories",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("scope", sa.String(255), nullable=False),
        sa.Column("path", sa.String(1024), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_memories"),
        sa.UniqueConstraint("scope", "path", name="uq_memories_scope_path"),
    )

    op.create_table(
        "audit",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("event", sa.String(64), nullable=False),
        sa.Column("platform", sa.String(32), nullable=True),
        sa.Column("user_id", sa.String(128), nullable=True),
        sa.Column("detail", sa.Text(), server_default=sa.text("''"), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit"),
    )
    op.create_index("ix_audit_event", "audit", ["event"])

    _create_search()


def _create_search() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for statement in SQLITE_FTS:
            op.execute(statement)
    elif dialect == "postgresql":
        op.add_column(
            "messages",
            sa.Column(
                "text_tsv",
                postgresql.TSVECTOR(),
                sa.Computed("to_tsvector('simple', text)", persisted=True),
                nullable=True,
            ),
        )
        op.create_index("ix_messages_text_tsv", "messages", ["text_tsv"], postgresql_using="gin")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for trigger in ("messages_fts_au", "messages_fts_ad", "messages_fts_ai"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS messages_fts")
    elif dialect == "postgresql":
        op.drop_index("ix_messages_text_tsv", table_name="messages")
    for table in ("audit", "memories", "outbox", "inbox", "usage", "messages", "compactions", "sessions"):
        op.drop_table(table)  # their indexes go with them
